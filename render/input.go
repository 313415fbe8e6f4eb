package render

import (
	"encoding/json"
	"fmt"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Input is what one render needs: the custom resource (JSON-shaped, as the
// apiserver stores it), where the result is published, and the facts the
// controller looked up in the cluster beforehand. Render never reads the
// cluster itself.
type Input struct {
	// Object is the custom resource: apiVersion, kind, metadata, spec and,
	// where the render uses it (a Workload's traffic split), status.
	Object map[string]any `json:"object"`
	// Publish says where the bundle goes and who applies it.
	Publish Publish `json:"publish"`
	// Resolved holds values looked up in the cluster before the render.
	Resolved Resolved `json:"resolved"`
}

// Publish says where a bundle is published and which applier applies it.
type Publish struct {
	// Path in the repository under which `<namespace>/<kind>/<name>/` lives.
	Path    string  `json:"path"`
	Applier Applier `json:"applier"`
}

// Applier is the GitOps tool that applies the bundle.
type Applier struct {
	// Kind is Flux or ArgoCD.
	Kind string `json:"kind"`
	// Namespace of the applier objects (flux-system, argocd).
	Namespace string `json:"namespace"`
	// Name of the Flux source that syncs the repository.
	Name string `json:"name"`
	// SourceKind is GitRepository or OCIRepository (Flux).
	SourceKind string `json:"sourceKind"`
	// RepoURL and Revision are the repository and branch (Argo CD).
	RepoURL  string `json:"repoURL"`
	Revision string `json:"revision"`
}

// DefaultPublish is the publish target of an offline render: repository
// root, applied by Flux from the GitRepository flux-system/scribe.
func DefaultPublish() Publish {
	return Publish{Path: ".", Applier: Applier{Kind: "Flux", Namespace: "flux-system", Name: "scribe", SourceKind: "GitRepository"}}
}

// Resolved holds cluster facts an Experiment render needs.
type Resolved struct {
	// AgentURL is the URL of the agent under test (Testkube mode), from
	// spec.workflow.testkube.agentRef; empty means the Service DNS name.
	AgentURL string `json:"agentURL,omitempty"`
	// OTELEndpoint is the OTLP endpoint from the cluster's otel-config ConfigMap.
	OTELEndpoint string `json:"otelEndpoint,omitempty"`
	// GCPProject is the GCP project of gke and talos clusters.
	GCPProject string `json:"gcpProject,omitempty"`
}

// ObjectFromClient converts a typed custom resource into the JSON shape of Input.Object.
func ObjectFromClient(obj client.Object) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", obj, err)
	}
	return m, nil
}

// ObjectsFromYAML splits a YAML stream into custom resources. Empty
// documents are skipped.
func ObjectsFromYAML(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	for i, doc := range splitYAML(string(data)) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		// Integers decode as int64 and other numbers as float64, as in the apiserver.
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var m map[string]any
		if err := utiljson.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if m == nil {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// splitYAML splits a stream at `---` document separators.
func splitYAML(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

// objectName returns Kind/namespace/name of a JSON-shaped object.
func objectName(obj map[string]any) string {
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return kind + "/" + ns + "/" + name
}
