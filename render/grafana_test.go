package render_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render"
)

// grafanaProvisioningV1 is Grafana's datasource provisioning file, apiVersion
// 1, with every field Grafana reads (pkg/services/provisioning/datasources,
// configsV1 and upsertDataSourceFromConfigV1, Grafana 11/12). Decoding
// strictly into it fails on a field Grafana would ignore.
type grafanaProvisioningV1 struct {
	APIVersion        int64                 `json:"apiVersion"`
	Datasources       []grafanaDatasourceV1 `json:"datasources"`
	DeleteDatasources []struct {
		OrgID   int64  `json:"orgId"`
		OrgName string `json:"orgName"`
		Name    string `json:"name"`
	} `json:"deleteDatasources"`
}

type grafanaDatasourceV1 struct {
	OrgID           int64             `json:"orgId"`
	OrgName         string            `json:"orgName"`
	Version         int               `json:"version"`
	Name            string            `json:"name"`
	Type            string            `json:"type"`
	Access          string            `json:"access"`
	URL             string            `json:"url"`
	User            string            `json:"user"`
	Database        string            `json:"database"`
	BasicAuth       bool              `json:"basicAuth"`
	BasicAuthUser   string            `json:"basicAuthUser"`
	WithCredentials bool              `json:"withCredentials"`
	IsDefault       bool              `json:"isDefault"`
	Correlations    []map[string]any  `json:"correlations"`
	JSONData        map[string]any    `json:"jsonData"`
	SecureJSONData  map[string]string `json:"secureJsonData"`
	Editable        bool              `json:"editable"`
	UID             string            `json:"uid"`
}

// grafanaUID is what Grafana accepts as a datasource uid.
var grafanaUID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,40}$`)

// TestTutorialRendersTheTenantsGrafanaDatasource: the gateway tutorial
// (observability on, tenant gateway-lab) renders, under Flux and under Argo
// CD alike, one ConfigMap labelled for Grafana's sidecar in the
// Experiment's namespace, holding a provisioning file Grafana reads (decoded
// strictly into Grafana's own field set): a Prometheus datasource on the
// hub's metrics backend whose only secure value is the tenant header's,
// the tenant ID itself, never a credential.
func TestTutorialRendersTheTenantsGrafanaDatasource(t *testing.T) {
	e := newEngine(t)
	for name, pub := range map[string]render.Publish{"Flux": render.DefaultPublish(), "ArgoCD": argoPublish()} {
		t.Run(name, func(t *testing.T) {
			b, err := e.Render(context.Background(), render.Input{Object: loadFixture(t, "gateway-tutorial.yaml"), Publish: pub, Resolved: testResolved})
			if err != nil {
				t.Fatal(err)
			}
			var cms []map[string]any
			for _, o := range renderedObjects(t, b) {
				if o["kind"] == "ConfigMap" && str(o, "metadata", "labels", render.GrafanaDatasourceLabel) == render.GrafanaDatasourceValue {
					cms = append(cms, o)
				}
			}
			if len(cms) != 1 {
				t.Fatalf("%d sidecar-labelled ConfigMaps, want one for tenant gateway-lab", len(cms))
			}
			cm := cms[0]
			if ns := str(cm, "metadata", "namespace"); ns != "experiments" {
				t.Errorf("ConfigMap in namespace %q, want the Experiment's", ns)
			}
			data, _ := cm["data"].(map[string]any)
			if len(data) != 1 {
				t.Fatalf("data %v, want one provisioning file", data)
			}
			for key, v := range data {
				if !strings.HasSuffix(key, ".yaml") || !strings.Contains(key, "experiments-gateway-tutorial-gateway-lab") {
					t.Errorf("file %q: want a .yaml named by namespace, Experiment and tenant (the sidecar writes every ConfigMap's files into one directory)", key)
				}
				js, err := yaml.YAMLToJSON([]byte(v.(string)))
				if err != nil {
					t.Fatal(err)
				}
				dec := json.NewDecoder(bytes.NewReader(js))
				dec.DisallowUnknownFields()
				var file grafanaProvisioningV1
				if err := dec.Decode(&file); err != nil {
					t.Fatalf("not a Grafana provisioning file: %v\n%s", err, v)
				}
				if file.APIVersion != 1 || len(file.Datasources) != 1 {
					t.Fatalf("apiVersion %d, %d datasources; want 1 and one", file.APIVersion, len(file.Datasources))
				}
				ds := file.Datasources[0]
				want := grafanaDatasourceV1{
					Name: ds.Name, UID: ds.UID, Type: "prometheus", Access: "proxy",
					URL:            "http://mimir-query-frontend.mimir.svc:8080/prometheus",
					JSONData:       map[string]any{"httpMethod": "POST", "httpHeaderName1": "X-Scope-OrgID"},
					SecureJSONData: map[string]string{"httpHeaderValue1": "gateway-lab"},
				}
				gotJS, _ := json.Marshal(ds)
				wantJS, _ := json.Marshal(want)
				if !bytes.Equal(gotJS, wantJS) {
					t.Errorf("datasource\n%s\nwant\n%s", gotJS, wantJS)
				}
				if !grafanaUID.MatchString(ds.UID) || !strings.Contains(ds.Name, "gateway-lab") {
					t.Errorf("uid %q, name %q: want a Grafana uid and the tenant in the name", ds.UID, ds.Name)
				}
			}
		})
	}
}

// TestTutorialHydratesTheSameObservabilityUnderBothAppliers: the gateway
// tutorial's collector (with the hub's address and the tenant header) and
// its datasource are the same plain objects under Flux and Argo CD: Scribe
// builds them, and only the applier object that applies them differs (and
// the collector's Namespace, which Argo CD's Application creates: see
// TestArgoCDLeavesAHydratedComponentsNamespaceToItsApplication).
func TestTutorialHydratesTheSameObservabilityUnderBothAppliers(t *testing.T) {
	e := newEngine(t)
	files := map[string]map[string]string{}
	for name, pub := range map[string]render.Publish{"Flux": render.DefaultPublish(), "ArgoCD": argoPublish()} {
		b, err := e.Render(context.Background(), render.Input{Object: loadFixture(t, "gateway-tutorial.yaml"), Publish: pub, Resolved: testResolved})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		files[name] = map[string]string{}
		for _, f := range b.Files {
			rel := strings.TrimPrefix(f.Path, b.Dir+"/")
			if strings.HasPrefix(rel, "components/app/observability/") || strings.HasPrefix(rel, "configmap-") {
				files[name][rel] = string(f.Data)
			}
		}
	}
	flux, argo := files["Flux"], files["ArgoCD"]
	const namespaceFile = "components/app/observability/namespace-observability.yaml"
	if flux[namespaceFile] == "" || argo[namespaceFile] != "" {
		t.Errorf("want %s under Flux only", namespaceFile)
	}
	delete(flux, namespaceFile)
	for _, files := range []map[string]string{flux, argo} {
		const k = "components/app/observability/kustomization.yaml"
		files[k] = strings.Replace(files[k], "- namespace-observability.yaml\n", "", 1)
	}
	if len(flux) < 5 {
		t.Fatalf("Flux: %d observability files, want the collector's objects, its kustomization.yaml and the datasource", len(flux))
	}
	for rel, data := range flux {
		if argo[rel] != data {
			t.Errorf("%s differs under Argo CD:\n%s\nFlux:\n%s", rel, argo[rel], data)
		}
	}
	if len(argo) != len(flux) {
		t.Errorf("Argo CD has %d observability files, Flux %d", len(argo), len(flux))
	}
	// Named per Experiment (render.OwnedSuffix), as every hydrated object.
	config := flux["components/app/observability/configmap-otel-collector"+render.OwnedSuffix("experiments", "gateway-tutorial")+".yaml"]
	for _, want := range []string{`endpoint: "https://otlp.hub.example.com:4317"`, `X-Scope-OrgID: "gateway-lab"`, "insecure: false"} {
		if !strings.Contains(config, want) {
			t.Errorf("the collector's configuration lacks %s:\n%s", want, config)
		}
	}
}
