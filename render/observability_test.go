package render

import (
	"reflect"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TestDecideTelemetry: a target with observability enabled exports to the
// hub's collector (spec.observability, else the otel-config ConfigMap) under
// its tenant; without an address, with one a target resolves inside
// itself, or on the hub, it is refused naming the field.
func TestDecideTelemetry(t *testing.T) {
	const (
		hubOTLP    = "https://otlp.hub.example.com:4317"
		hubMetrics = "http://mimir-query-frontend.mimir.svc:8080/prometheus"
	)
	gke := func(name string, o *scribev1.Observability) scribev1.Target {
		return scribev1.Target{Name: name, Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterGKE}, Observability: o}
	}
	on := func(tenant string) *scribev1.Observability {
		return &scribev1.Observability{Enabled: true, Transport: "direct", Tenant: tenant}
	}
	hubObs := func(endpoint, metrics string) *scribev1.HubObservability {
		return &scribev1.HubObservability{Endpoint: endpoint, MetricsURL: metrics}
	}
	for _, tt := range []struct {
		name    string
		spec    scribev1.ExperimentSpec
		res     Resolved
		want    []*targetTelemetry
		tenants []string
		metrics string
		errs    []string // "path: part of the message"
	}{
		{
			name: "off: nothing is needed",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", nil), gke("b", &scribev1.Observability{Transport: "direct"})}},
			want: []*targetTelemetry{nil, nil},
		},
		{
			name:    "the Experiment's addresses; tenant defaults to the namespace",
			spec:    scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on("")), gke("db", on("lab-b"))}, Observability: hubObs(hubOTLP, hubMetrics)},
			want:    []*targetTelemetry{{Tenant: "lab", Transport: "direct", Endpoint: hubOTLP}, {Tenant: "lab-b", Transport: "direct", Endpoint: hubOTLP}},
			tenants: []string{"lab", "lab-b"},
			metrics: hubMetrics,
		},
		{
			name:    "the ConfigMap's addresses; plain http is insecure; one tenant once",
			spec:    scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on("t")), gke("db", on("t"))}},
			res:     Resolved{OTELEndpoint: "http://10.0.0.7:4317", MetricsURL: hubMetrics},
			want:    []*targetTelemetry{{Tenant: "t", Transport: "direct", Endpoint: "http://10.0.0.7:4317", Insecure: true}, {Tenant: "t", Transport: "direct", Endpoint: "http://10.0.0.7:4317", Insecure: true}},
			tenants: []string{"t"},
			metrics: hubMetrics,
		},
		{
			name:    "the Experiment's field wins over the ConfigMap",
			spec:    scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on("t"))}, Observability: hubObs(hubOTLP, "")},
			res:     Resolved{OTELEndpoint: "http://otlp.other.example.com:4317", MetricsURL: hubMetrics},
			want:    []*targetTelemetry{{Tenant: "t", Transport: "direct", Endpoint: hubOTLP}},
			tenants: []string{"t"},
			metrics: hubMetrics,
		},
		{
			name: "no collector address anywhere: refused, no default",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs("", hubMetrics)},
			errs: []string{`spec.observability.endpoint: target "app" ships telemetry to the hub's collector and no address is given`},
		},
		{
			name: "no metrics URL anywhere: refused",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs(hubOTLP, "")},
			errs: []string{"spec.observability.metricsURL: observability is enabled and the tenant's Grafana datasource needs"},
		},
		{
			name: "the target collector's own Service: it would export to itself",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs("http://otel-collector.observability.svc.cluster.local:4317", hubMetrics)},
			errs: []string{"spec.observability.endpoint: \"http://otel-collector.observability.svc.cluster.local:4317\" is an in-cluster name"},
		},
		{
			name: "an in-cluster name from the ConfigMap says where it came from",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}},
			res:  Resolved{OTELEndpoint: "http://collector.monitoring.svc:4317", MetricsURL: hubMetrics},
			errs: []string{"spec.observability.endpoint: \"http://collector.monitoring.svc:4317\" is an in-cluster name, which a target cluster resolves to its own Services"},
		},
		{
			name: "a bare Service name",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs("http://otel-collector:4317", hubMetrics)},
			errs: []string{"spec.observability.endpoint: \"http://otel-collector:4317\" is an in-cluster name"},
		},
		{
			name: "no port",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs("https://otlp.hub.example.com", hubMetrics)},
			errs: []string{"spec.observability.endpoint: \"https://otlp.hub.example.com\" has no port"},
		},
		{
			name: "credentials in the addresses would be committed",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs("https://u:p@otlp.hub.example.com:4317", "https://u:p@mimir.example.com/prometheus")},
			errs: []string{
				"spec.observability.endpoint: \"https://u:p@otlp.hub.example.com:4317\" carries credentials",
				"spec.observability.metricsURL: \"https://u:p@mimir.example.com/prometheus\" carries credentials",
			},
		},
		{
			name: "a path is not an OTLP/gRPC address; a $ would be expanded by Grafana",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", on(""))}, Observability: hubObs("https://otlp.hub.example.com:4317/v1/traces", "http://mimir.example.com/$TENANT")},
			errs: []string{
				"spec.observability.endpoint: \"https://otlp.hub.example.com:4317/v1/traces\" has a path",
				"spec.observability.metricsURL: \"http://mimir.example.com/$TENANT\" holds a $",
			},
		},
		{
			name: "a hub target: refused, it has no collector of its own",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", nil), {Name: "loadgen", Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}, Observability: on("")}}, Observability: hubObs(hubOTLP, hubMetrics)},
			errs: []string{`spec.targets[1].observability.enabled: target "loadgen" is the hub`},
		},
		{
			name: "tailscale: refused, not ignored",
			spec: scribev1.ExperimentSpec{Targets: []scribev1.Target{gke("app", &scribev1.Observability{Enabled: true, Transport: "tailscale"})}, Observability: hubObs(hubOTLP, hubMetrics)},
			errs: []string{"spec.targets[0].observability.transport: tailscale is not implemented"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan, errs := decideTelemetry(tt.spec, "lab", tt.res)
			if len(errs) != len(tt.errs) {
				t.Fatalf("errors %v, want %d: %q", errs, len(tt.errs), tt.errs)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.errs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), tt.errs[i])
				}
			}
			if len(tt.errs) > 0 {
				return
			}
			if !reflect.DeepEqual(plan.Targets, tt.want) {
				t.Errorf("targets = %+v, want %+v", plan.Targets, tt.want)
			}
			if !reflect.DeepEqual(plan.Tenants, tt.tenants) || plan.MetricsURL != tt.metrics {
				t.Errorf("tenants %v metrics %q, want %v %q", plan.Tenants, plan.MetricsURL, tt.tenants, tt.metrics)
			}
		})
	}
}

// TestInCluster: the names a target cluster resolves to its own Services.
func TestInCluster(t *testing.T) {
	for host, want := range map[string]bool{
		"otel-collector": true, "otel-collector.observability": true, "mimir.monitoring": false, "otel-collector.observability.svc": true,
		"otel-collector.observability.svc.cluster.local": true, "otel-collector.observability.svc.cluster.local.": true,
		"otlp.hub.example.com": false, "10.0.0.7": false, "::1": false,
	} {
		if got := inCluster(host); got != want {
			t.Errorf("inCluster(%q) = %v, want %v", host, got, want)
		}
	}
}
