package render

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// TenantHeader is the header the hub's collector and metrics backend route
// a tenant's telemetry by (Mimir, Loki and Tempo read X-Scope-OrgID).
const TenantHeader = "X-Scope-OrgID"

// telemetryPlan is what an Experiment's observability renders: per target
// (spec order) the wiring of its collector, nil where observability is off,
// and the tenants a Grafana datasource is rendered for.
type telemetryPlan struct {
	Targets []*targetTelemetry
	// MetricsURL is the hub metrics backend Grafana queries.
	MetricsURL string
	// Tenants are the distinct tenants of the targets, sorted.
	Tenants []string
}

// targetTelemetry is the wiring of one target's collector: the params of
// the otel-collector catalog entry.
type targetTelemetry struct {
	Tenant    string
	Transport string
	// Endpoint is the hub collector's OTLP/gRPC address.
	Endpoint string
	// Insecure is true for an http:// endpoint (no TLS).
	Insecure bool
}

// params are the otel-collector entry's params.
func (t *targetTelemetry) params() map[string]any {
	return map[string]any{"tenant": t.Tenant, "transport": t.Transport, "endpoint": t.Endpoint, "insecure": fmt.Sprint(t.Insecure)}
}

// hubSources name where a hub address came from, for messages.
const (
	endpointPath   = "spec.observability.endpoint"
	metricsURLPath = "spec.observability.metricsURL"
	configMapNote  = "ConfigMap otel-config in the Experiment's namespace"
)

// decideTelemetry decides the observability of an Experiment in namespace
// ns: each target with observability enabled gets a collector exporting
// to the hub's collector under its tenant (default: the namespace). The
// hub's addresses are spec.observability's, else what the controller read
// from the otel-config ConfigMap (res); without them, or with an address
// the targets cannot reach the hub at, it is refused naming the field:
// there is no default address, since any default (the collector's own
// Service) would export the telemetry to the target itself. A hub target
// is refused: its workloads run beside the hub's collector, and a
// collector of its own would be the one every hub Experiment shares.
func decideTelemetry(spec scribev1.ExperimentSpec, ns string, res Resolved) (telemetryPlan, []FieldError) {
	plan := telemetryPlan{Targets: make([]*targetTelemetry, len(spec.Targets))}
	var errs []FieldError
	var enabled []int
	for i, t := range spec.Targets {
		if o := t.Observability; o != nil && o.Enabled {
			enabled = append(enabled, i)
		}
	}
	if len(enabled) == 0 {
		return plan, nil
	}
	var hub scribev1.HubObservability
	if spec.Observability != nil {
		hub = *spec.Observability
	}
	endpoint, fromCM := hub.Endpoint, false
	if endpoint == "" {
		endpoint, fromCM = res.OTELEndpoint, true
	}
	insecure, fe := checkOTLPEndpoint(endpoint, fromCM, spec.Targets[enabled[0]].Name)
	if fe != nil {
		errs = append(errs, *fe)
	}
	metricsURL, mFromCM := hub.MetricsURL, false
	if metricsURL == "" {
		metricsURL, mFromCM = res.MetricsURL, true
	}
	if fe := checkMetricsURL(metricsURL, mFromCM); fe != nil {
		errs = append(errs, *fe)
	}
	plan.MetricsURL = metricsURL
	for _, i := range enabled {
		t := spec.Targets[i]
		o := t.Observability
		at := fmt.Sprintf("spec.targets[%d].observability", i)
		switch {
		case t.Cluster.Type == scribev1.ClusterHub:
			errs = append(errs, FieldError{Path: at + ".enabled", Message: fmt.Sprintf(
				"target %q is the hub, where the hub's collector runs: its workloads export OTLP to that collector directly (with the header %s: <tenant>); Scribe deploys a collector only on the clusters it creates, since one on the hub would be shared by every Experiment there", t.Name, TenantHeader)})
			continue
		case o.Transport == "tailscale":
			errs = append(errs, FieldError{Path: at + ".transport", Message: "tailscale is not implemented: the collector would ship over the cluster network exactly as with direct, so it is refused rather than ignored; use transport: direct with a network path from the target to the hub's collector"})
			continue
		}
		tenant := o.Tenant
		if tenant == "" {
			tenant = ns
		}
		transport := o.Transport
		if transport == "" {
			transport = "direct"
		}
		if len(errs) > 0 {
			// No wiring without the hub's addresses: the errors say why.
			continue
		}
		plan.Targets[i] = &targetTelemetry{Tenant: tenant, Transport: transport, Endpoint: endpoint, Insecure: insecure}
		if !slices.Contains(plan.Tenants, tenant) {
			plan.Tenants = append(plan.Tenants, tenant)
		}
	}
	slices.Sort(plan.Tenants)
	return plan, errs
}

// checkOTLPEndpoint checks the hub collector's address as a target's
// collector exports to it and says whether it is plain http. fromCM says it
// came from the otel-config ConfigMap; target names a target that needs it.
func checkOTLPEndpoint(endpoint string, fromCM bool, target string) (insecure bool, fe *FieldError) {
	bad := func(format string, args ...any) (bool, *FieldError) {
		msg := fmt.Sprintf(format, args...)
		if fromCM {
			msg = fmt.Sprintf("%s (key endpoint of %s; set this field to override it)", msg, configMapNote)
		}
		return false, &FieldError{Path: endpointPath, Message: msg}
	}
	if endpoint == "" {
		return false, &FieldError{Path: endpointPath, Message: fmt.Sprintf(
			"target %q ships telemetry to the hub's collector and no address is given: set the OTLP/gRPC address the target clusters reach the hub's collector at (http://host:port or https://host:port), here or as key endpoint of %s", target, configMapNote)}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("%q is not an OTLP/gRPC address: want http://host:port (no TLS) or https://host:port", endpoint)
	}
	if u.User != nil {
		return bad("%q carries credentials, which would be committed to Git: the collector authenticates by the tenant header only", endpoint)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return bad("%q has a path, query or fragment: an OTLP/gRPC address is scheme://host:port", endpoint)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return bad("%q has no port: give the hub collector's OTLP/gRPC port (4317 by default)", endpoint)
	}
	if inCluster(host) {
		return bad("%q is an in-cluster name, which a target cluster resolves to its own Services: its collector would export to itself (otel-collector.observability is its own Service) or to nothing; give the address the targets reach the hub's collector at (a LoadBalancer, Ingress or Gateway on the hub)", endpoint)
	}
	return u.Scheme == "http", nil
}

// inCluster reports whether host is a Kubernetes in-cluster DNS name: a
// bare Service name, one under .svc or cluster.local, or the target
// collector's own <service>.<namespace> (which a pod's search path
// resolves first). Another two-label name cannot be told from a domain.
func inCluster(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if net.ParseIP(h) != nil {
		return false
	}
	return !strings.Contains(h, ".") || h == collectorService || strings.HasSuffix(h, ".svc") || strings.HasSuffix(h, ".cluster.local")
}

// collectorService is the target collector's own Service, as
// <name>.<namespace> (catalog/config/otel-collector).
const collectorService = "otel-collector.observability"

// checkMetricsURL checks the hub metrics backend's query URL.
func checkMetricsURL(metricsURL string, fromCM bool) *FieldError {
	bad := func(format string, args ...any) *FieldError {
		msg := fmt.Sprintf(format, args...)
		if fromCM {
			msg = fmt.Sprintf("%s (key metricsURL of %s; set this field to override it)", msg, configMapNote)
		}
		return &FieldError{Path: metricsURLPath, Message: msg}
	}
	if metricsURL == "" {
		return &FieldError{Path: metricsURLPath, Message: fmt.Sprintf(
			"observability is enabled and the tenant's Grafana datasource needs the hub metrics backend's Prometheus-compatible query URL (for Mimir http://mimir-query-frontend.mimir.svc:8080/prometheus): set it here or as key metricsURL of %s", configMapNote)}
	}
	u, err := url.Parse(metricsURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("%q is not an http(s) URL", metricsURL)
	}
	if u.User != nil {
		return bad("%q carries credentials, which would be committed to Git", metricsURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return bad("%q has a query or fragment: give the backend's base query URL", metricsURL)
	}
	if strings.Contains(metricsURL, "$") {
		return bad("%q holds a $, which Grafana's provisioning expands from its own environment", metricsURL)
	}
	return nil
}
