package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// checkTelemetryReachesTheHub: the catalog's collector
// (catalog/config/otel-collector), delivered by the applier to the app
// cluster for a target with observability on under tenant, runs there:
// the real OpenTelemetry Collector (hack/build-otelcol.sh, pushed in place
// of the catalog's image) on the app cluster's node, with the
// configuration Scribe rendered. A span a workload sends it (OTLP/HTTP
// JSON to its Service) reaches the hub's collector, a real collector on
// the host at spec.observability.endpoint, under the tenant twice: the
// resource attribute scribe.tenant the target's collector sets, and the
// X-Scope-OrgID header it sends, which the hub's collector copies into an
// attribute. The hub has the tenant's Grafana datasource in namespace ns.
func checkTelemetryReachesTheHub(t *testing.T, s *Stack, a *AppCluster, hub *HubCollector, applier scribev1.ApplierKind, ns, tenant string) {
	t.Helper()
	ctx := context.Background()
	// The collector runs on the app cluster's node, from the image the
	// catalog names.
	var svc corev1.Service
	poll(t, 6*time.Minute, "the collector Ready on the app cluster", func() (bool, string) {
		ds := &appsv1.DeploymentList{}
		if err := a.Client.List(ctx, ds, client.InNamespace("observability"), client.MatchingLabels{"app.kubernetes.io/part-of": "otel-collector"}); err != nil {
			return false, err.Error()
		}
		if len(ds.Items) != 1 || ds.Items[0].Status.ReadyReplicas < 1 {
			pods := &corev1.PodList{}
			_ = a.Client.List(ctx, pods, client.InNamespace("observability"))
			var states []string
			for _, p := range pods.Items {
				states = append(states, podState(&p))
			}
			return false, fmt.Sprintf("%d Deployments; pods: %s", len(ds.Items), strings.Join(states, "; "))
		}
		svcs := &corev1.ServiceList{}
		if err := a.Client.List(ctx, svcs, client.InNamespace("observability"), client.MatchingLabels{"app.kubernetes.io/part-of": "otel-collector"}); err != nil || len(svcs.Items) != 1 {
			return false, fmt.Sprintf("the collector's Service: %d, %v", len(svcs.Items), err)
		}
		svc = svcs.Items[0]
		return true, ""
	})
	pods := &corev1.PodList{}
	if err := a.Client.List(ctx, pods, client.InNamespace("observability"), client.MatchingLabels{"app.kubernetes.io/name": "otel-collector"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != appNodeName || p.Status.Phase != corev1.PodRunning || p.Spec.Containers[0].Image != "docker.io/"+CollectorImage {
			t.Fatalf("collector pod %s (image %s): %s", p.Name, p.Spec.Containers[0].Image, podState(&p))
		}
	}

	// A workload's span, sent to the collector's Service (routed from the
	// host into the app cluster), reaches the hub's collector under the
	// tenant.
	target := net.JoinHostPort(svc.Spec.ClusterIP, "4318")
	name := fmt.Sprintf("scribe-e2e-%s-%d", applier, time.Now().UnixNano())
	sent := time.Now()
	var got ReceivedSpan
	pollEvery(t, 2*time.Second, 2*time.Minute, "the span at the hub's collector", func() (bool, string) {
		spans, err := hub.Spans()
		if err != nil {
			return false, err.Error()
		}
		for _, sp := range spans {
			if sp.Name == name {
				got = sp
				return true, ""
			}
		}
		// Sent again until it arrives: the first may meet the
		// collector's Service before kube-proxy has its endpoint.
		if err := SendSpan(ctx, target, name); err != nil {
			return false, fmt.Sprintf("send to the target's collector at %s: %v", target, err)
		}
		return false, fmt.Sprintf("sent to %s; %d spans at the hub; the hub collector's log: %s", target, len(spans), s.Logs("otelcol-hub", 5))
	})
	t.Logf("%s: a span sent to the app cluster's collector at %s reached the hub's collector at %s within %s: resource %v, attributes %v",
		applier, target, hub.Endpoint, time.Since(sent).Round(100*time.Millisecond), got.Resource, got.Attrs)
	if got.Resource["scribe.tenant"] != tenant {
		t.Errorf("the span's resource attribute scribe.tenant = %q, want %q (the target collector's resource processor)", got.Resource["scribe.tenant"], tenant)
	}
	if got.Attrs[TenantHeaderAttribute] != tenant {
		t.Errorf("the X-Scope-OrgID header the hub's collector received = %q, want %q (the target collector's exporter header)", got.Attrs[TenantHeaderAttribute], tenant)
	}
	if got.Resource["service.name"] != "scribe-e2e" {
		t.Errorf("the span's resource lost the workload's service.name: %v", got.Resource)
	}

	// The hub has the tenant's Grafana datasource.
	cms := &corev1.ConfigMapList{}
	if err := s.Client.List(ctx, cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var datasource []string
	for _, cm := range cms.Items {
		if strings.Contains(cm.Name, "datasource-"+tenant) {
			datasource = append(datasource, cm.Name)
		}
	}
	if len(datasource) != 1 {
		t.Errorf("the tenant's Grafana datasource ConfigMaps on the hub: %v", datasource)
	}
}
