package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
	"github.com/scribe-gitops/scribe/internal/yamlstream"
	"github.com/scribe-gitops/scribe/render/contract"
)

// Input is an untyped render request: a custom resource in the JSON shape
// the apiserver stores (from YAML, in the CLI), where the result is
// published, and the facts the controller looked up beforehand. Render
// decodes it into the typed WorkloadInput or ExperimentInput (after the
// apiserver's validation and defaulting) and renders that. Render never
// reads the cluster itself.
type Input struct {
	// Object is the custom resource: apiVersion, kind, metadata, spec and,
	// for a Workload, optionally status.traffic and status.stableVersion
	// (the split to render).
	Object map[string]any `json:"object"`
	// Publish says where the bundle goes and who applies it.
	Publish Publish `json:"publish"`
	// Resolved holds values looked up in the cluster before the render.
	Resolved Resolved `json:"resolved"`
	// Stage is the commit stage of an Experiment to render, 1 to 4; 0
	// renders its final tree. A Workload has no stages.
	Stage int32 `json:"stage,omitempty"`
}

// WorkloadInput is one Workload render.
type WorkloadInput struct {
	// Workload as the apiserver stores it; render validates and defaults
	// it again with the apiserver's code. Its status is not read: the split
	// is Traffic and Stable.
	Workload *scribev1.Workload
	// Traffic is the split to render, one weight per version in
	// spec.versions, adding up to 100; empty means the newest version (the
	// last entry) takes all traffic.
	Traffic []scribev1.VersionWeight
	// Stable is the version the stable Service selects; empty or unknown
	// means the version with the highest weight.
	Stable string
	// Publish says where the bundle goes and who applies it.
	Publish Publish
}

// ExperimentInput is one Experiment render.
type ExperimentInput struct {
	// Experiment as the apiserver stores it; render validates and defaults
	// it again with the apiserver's code.
	Experiment *scribev1.Experiment
	// Publish says where the bundle goes and who applies it.
	Publish Publish
	// Resolved holds cluster facts the controller looked up.
	Resolved Resolved
	// Stage is the commit stage to render, 1 to 4 (see
	// v1alpha1.ExperimentStatus.Stage); 0 renders the final tree (stage 4).
	Stage int32
}

// Publish says where a bundle is published and which applier applies it
// (the templates' publish input).
type Publish = contract.Publish

// Applier is the GitOps tool that applies a bundle.
type Applier = contract.Applier

// FluxArtifactSource is where each per-CR Flux OCIRepository pulls from
// (see contract.FluxArtifactSource).
type FluxArtifactSource = contract.FluxArtifactSource

// FluxGitSource is what each per-CR Flux GitRepository copies from the
// Repository's (see contract.FluxGitSource).
type FluxGitSource = contract.FluxGitSource

// DefaultPublish is the publish target of an offline render: repository
// root, applied by Flux from the GitRepository flux-system/scribe.
func DefaultPublish() Publish {
	return Publish{Path: ".", Applier: Applier{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe", SourceKind: contract.SourceGitRepository}}
}

// checkPublish refuses an applier or source kind the templates do not
// know (the enums of contract.Applier, which the CUE contract checks in
// tests).
func checkPublish(p Publish) []FieldError {
	var errs []FieldError
	switch p.Applier.Kind {
	case scribev1.ApplierFlux, scribev1.ApplierArgoCD:
	default:
		errs = append(errs, FieldError{Path: "publish.applier.kind", Message: fmt.Sprintf("must be %s or %s, not %q", scribev1.ApplierFlux, scribev1.ApplierArgoCD, p.Applier.Kind)})
	}
	switch p.Applier.SourceKind {
	case contract.SourceGitRepository, contract.SourceOCIRepository:
	default:
		errs = append(errs, FieldError{Path: "publish.applier.sourceKind", Message: fmt.Sprintf("must be %s or %s, not %q", contract.SourceGitRepository, contract.SourceOCIRepository, p.Applier.SourceKind)})
	}
	// The URLs are written into the sync objects: credentials there would
	// be in Git (and Argo CD's UI) for anyone who reads them.
	if err := credurl.Check(p.Applier.RepoURL); err != nil {
		errs = append(errs, FieldError{Path: "publish.applier.repoURL", Message: err.Error()})
	}
	if fs := p.Applier.FluxSource; fs != nil {
		if err := credurl.Check(fs.URL); err != nil {
			errs = append(errs, FieldError{Path: "publish.applier.fluxSource.url", Message: err.Error()})
		}
	}
	if fa := p.Applier.FluxArtifact; fa != nil {
		if err := checkArtifactPrefix(fa.URL); err != nil {
			errs = append(errs, FieldError{Path: "publish.applier.fluxArtifact.url", Message: err.Error()})
		}
	}
	return errs
}

// Resolved holds cluster facts an Experiment render needs.
type Resolved struct {
	// OTELEndpoint is the OTLP endpoint from the cluster's otel-config
	// ConfigMap (key endpoint): the hub collector's address targets export
	// to when the Experiment's spec.observability.endpoint is empty.
	OTELEndpoint string `json:"otelEndpoint,omitempty"`
	// MetricsURL is the hub metrics backend's query URL from the same
	// ConfigMap (key metricsURL), when spec.observability.metricsURL is
	// empty.
	MetricsURL string `json:"metricsURL,omitempty"`
	// GCPProject is the GCP project of gke and talos clusters.
	GCPProject string `json:"gcpProject,omitempty"`
	// Catalog is where the catalog is published (the Repository's
	// spec.catalog source), or nil: components whose entry's source is
	// `type: "catalog"` (the built-in app, config and workflow entries)
	// need it.
	Catalog *CatalogSource `json:"catalog,omitempty"`
	// TargetAddresses are the targets' addresses as read back (status.targets[].address),
	// by target name, for `{{ targets.<name>.address }}` in workflow params.
	TargetAddresses map[string]string `json:"targetAddresses,omitempty"`
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

// ObjectsFromYAML splits a YAML stream into custom resources, by the
// apiserver tooling's rule (yamlstream.Split): a separator that carries a
// document ("--- {...}") or content after a "..." end marker is an error
// naming the document and line, never a document dropped. Empty documents
// are skipped, and one whose aliases would expand beyond
// yamlstream.MaxDecodedSize is an error. A key given twice in one mapping is an error naming the
// key and the document: YAML parsers disagree on which value wins, so the
// apiserver (which refuses it too) and Scribe could read different
// objects.
func ObjectsFromYAML(data []byte) ([]map[string]any, error) {
	docs, err := yamlstream.Split(data)
	if err != nil {
		return nil, fmt.Errorf("YAML stream: %w", err)
	}
	var out []map[string]any
	for i, doc := range docs {
		if len(bytes.TrimSpace(doc.Data)) == 0 {
			continue
		}
		// Aliases are expanded by the decoder: bound what they expand to
		// before it copies anything.
		if err := yamlstream.CheckDecodedSize(doc.Data, yamlstream.MaxDecodedSize); err != nil {
			return nil, fmt.Errorf("document %d (from line %d): %w", i+1, doc.Line, err)
		}
		// Integers decode as int64 and other numbers as float64, as in the apiserver.
		js, err := yaml.YAMLToJSONStrict(doc.Data)
		if err != nil {
			// The parser counts lines from the document's start.
			return nil, fmt.Errorf("document %d (from line %d): %w", i+1, doc.Line, err)
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

// objectName returns Kind/namespace/name of a JSON-shaped object, for
// messages: a part that is not a plain name (a newline, a quote, a slash)
// is quoted, so an invalid name cannot forge lines of the message.
func objectName(obj map[string]any) string {
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return plainOrQuoted(kind) + "/" + plainOrQuoted(ns) + "/" + plainOrQuoted(name)
}

// plainOrQuoted returns s when it holds only letters, digits, '-', '.' and
// '_' (and is not made of dots alone), else s quoted as a Go string.
func plainOrQuoted(s string) string {
	dots := true
	for _, r := range s {
		switch {
		case r == '.':
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			dots = false
		default:
			return strconv.Quote(s)
		}
	}
	if dots && s != "" {
		return strconv.Quote(s)
	}
	return s
}
