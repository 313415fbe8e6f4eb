package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestLoopAppClusterRunsPodsTheHubReaches: the loop's second cluster runs a
// real pod on its own node (pulled through the hub node's registry), its
// kube-proxy serves the pod behind a ClusterIP Service, and the host, where
// the hub's processes run and through which the hub's pods route, reaches
// both the pod and the Service, while the hub's own node is untouched.
func TestLoopAppClusterRunsPodsTheHubReaches(t *testing.T) {
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{RealNode: true, ControlPlaneOnly: true})
	ctx := context.Background()
	if err := s.Node.PushStandIns(ctx, s.logf); err != nil {
		t.Fatal(err)
	}
	a := s.StartAppCluster(t)
	labels := map[string]string{"app": "echo"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "echo", Image: "docker.io/hashicorp/http-echo:1.0.0", Args: []string{"-listen=:8080", "-text=hello from the app cluster"},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
		}}},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	start := time.Now()
	if err := a.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := a.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{}
	poll(t, 2*time.Minute, "the pod Ready on the app cluster's node", func() (bool, string) {
		_ = a.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "echo"}, p)
		return podReady(p), podState(p)
	})
	t.Logf("app cluster: pod create → Ready %s on %s, pod IP %s", time.Since(start).Round(time.Millisecond), p.Spec.NodeName, p.Status.PodIP)
	if p.Spec.NodeName != appNodeName || !strings.HasPrefix(p.Status.PodIP, "10.213.8.") {
		t.Fatalf("the pod runs on %q at %s, want %s in %s", p.Spec.NodeName, p.Status.PodIP, appNodeName, appPodSubnet)
	}
	if err := a.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "echo"}, svc); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	for _, url := range []string{"http://" + p.Status.PodIP + ":8080/", "http://" + svc.Spec.ClusterIP + "/"} {
		poll(t, time.Minute, "an answer from "+url, func() (bool, string) {
			resp, err := hc.Get(url)
			if err != nil {
				return false, err.Error()
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(b), "hello from the app cluster"), fmt.Sprintf("%s: %q", resp.Status, b)
		})
	}
	// The hub's node holds no pod of the app cluster, and its kube-proxy
	// knows nothing of the app cluster's Service.
	if out, err := exec.Command("iptables-save", "-t", "nat").Output(); err != nil || strings.Contains(string(out), svc.Spec.ClusterIP) {
		t.Fatalf("the host's nat table names the app cluster's Service %s (err %v)", svc.Spec.ClusterIP, err)
	}
}
