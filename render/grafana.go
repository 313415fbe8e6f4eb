package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/render/contract"
)

// Grafana's sidecar (the grafana Helm chart's sidecar.datasources, kiwigrid
// k8s-sidecar) provisions every ConfigMap labelled grafana_datasource: "1"
// in the namespaces it searches: it writes each data key as a file into
// Grafana's provisioning/datasources directory and asks Grafana to reload.
const (
	// GrafanaDatasourceLabel is the label the sidecar selects by, and
	// GrafanaDatasourceValue its value (the chart's default).
	GrafanaDatasourceLabel = "grafana_datasource"
	GrafanaDatasourceValue = "1"
)

// grafanaProvisioning is a Grafana datasource provisioning file
// (https://grafana.com/docs/grafana/latest/administration/provisioning/#data-sources),
// the fields Scribe writes. It is decoded strictly in tests: a field Grafana
// does not know is an error.
type grafanaProvisioning struct {
	APIVersion  int                 `json:"apiVersion"`
	Datasources []grafanaDatasource `json:"datasources"`
}

// grafanaDatasource is one datasource of a provisioning file.
type grafanaDatasource struct {
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Type      string `json:"type"`
	Access    string `json:"access"`
	URL       string `json:"url"`
	IsDefault bool   `json:"isDefault"`
	Editable  bool   `json:"editable"`
	// JSONData names the custom header; SecureJSONData holds its value.
	// The value is the tenant ID, never a credential: the file is
	// committed to Git.
	JSONData       grafanaJSONData       `json:"jsonData"`
	SecureJSONData grafanaSecureJSONData `json:"secureJsonData"`
}

// grafanaJSONData is a Prometheus datasource's jsonData, as Scribe sets it.
type grafanaJSONData struct {
	HTTPMethod      string `json:"httpMethod"`
	HTTPHeaderName1 string `json:"httpHeaderName1"`
}

// grafanaSecureJSONData carries the custom header's value.
type grafanaSecureJSONData struct {
	HTTPHeaderValue1 string `json:"httpHeaderValue1"`
}

// grafanaDatasources renders the Grafana datasource of each tenant of an
// Experiment (namespace ns, name exp): a Prometheus datasource reading the
// hub's metrics backend (metricsURL) with the tenant header, in a
// provisioning file the template puts into a sidecar-labelled ConfigMap.
// Names and file keys carry the namespace and Experiment: the sidecar
// writes every ConfigMap's keys into one directory, and Grafana wants
// datasource names unique.
func grafanaDatasources(ns, exp, metricsURL string, tenants []string) ([]contract.Datasource, error) {
	out := make([]contract.Datasource, 0, len(tenants))
	for _, tenant := range tenants {
		sum := sha256.Sum256([]byte(ns + "/" + exp + "/" + tenant))
		file := grafanaProvisioning{APIVersion: 1, Datasources: []grafanaDatasource{{
			Name:           fmt.Sprintf("%s metrics (%s/%s)", tenant, ns, exp),
			UID:            "scribe-" + hex.EncodeToString(sum[:])[:16],
			Type:           "prometheus",
			Access:         "proxy",
			URL:            metricsURL,
			JSONData:       grafanaJSONData{HTTPMethod: "POST", HTTPHeaderName1: TenantHeader},
			SecureJSONData: grafanaSecureJSONData{HTTPHeaderValue1: tenant},
		}}}
		b, err := yaml.Marshal(file)
		if err != nil {
			return nil, fmt.Errorf("grafana datasource of tenant %s: %w", tenant, err)
		}
		out = append(out, contract.Datasource{
			Tenant: tenant,
			Name:   fmt.Sprintf("%s-datasource-%s", exp, tenant),
			Key:    fmt.Sprintf("scribe-%s-%s-%s.yaml", ns, exp, tenant),
			File:   string(b),
		})
	}
	return out, nil
}
