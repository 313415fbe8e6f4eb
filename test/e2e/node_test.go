package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHostStateDiffNamesWhatARunLeftBehind(t *testing.T) {
	base := func() hostState {
		return hostState{
			Procs: []string{"containerd"}, Mounts: []string{"/", "/proc"}, Links: []string{"eth0", "lo"},
			Chains: []string{"filter chain INPUT"}, Sysctls: map[string]string{"net.ipv4.ip_forward": "0"},
			Paths: []string{"/var/lib/cni"}, Hostname: "h",
		}
	}
	kubeletMount := filepath.Join(os.TempDir(), "scribe-node-1", "kubelet")
	tests := []struct {
		name   string
		change func(*hostState)
		want   []string
	}{
		{"nothing changed", func(*hostState) {}, nil},
		{"a second containerd of the same name", func(h *hostState) { h.Procs = append(h.Procs, "containerd") }, []string{"process containerd"}},
		{"a process that ran before and is gone is no leftover", func(h *hostState) { h.Procs = nil }, nil},
		{"a mount under the node's folder", func(h *hostState) { h.Mounts = append(h.Mounts, kubeletMount) }, []string{"mount " + kubeletMount}},
		{"the bridge", func(h *hostState) { h.Links = append(h.Links, nodeBridge) }, []string{"network interface " + nodeBridge}},
		{"a kube-proxy chain", func(h *hostState) { h.Chains = append(h.Chains, "nat chain KUBE-SERVICES") }, []string{"iptables nat chain KUBE-SERVICES"}},
		{"a sysctl the bridge plugin set", func(h *hostState) { h.Sysctls["net.ipv4.ip_forward"] = "1" }, []string{`sysctl net.ipv4.ip_forward = "1", was "0"`}},
		{"a kubepods cgroup", func(h *hostState) { h.Cgroups = []string{"/sys/fs/cgroup/memory/kubepods"} }, []string{"cgroup /sys/fs/cgroup/memory/kubepods"}},
		{"a hard-coded path", func(h *hostState) { h.Paths = append(h.Paths, "/var/lib/kubelet") }, []string{"path /var/lib/kubelet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := base()
			after.Sysctls = map[string]string{"net.ipv4.ip_forward": "0"}
			tt.change(&after)
			if got := diffHostState(base(), after); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("diff = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUnescapeMountReadsMountinfoOctalEscapes(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/tab\011x`: "/tab\tx", `/odd\9`: `/odd\9`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoopRealNodeRunsPodsWhoseReadinessIsReal runs two pods on the real
// node: one whose readiness probe passes becomes Ready, and one whose probe
// reaches a port nothing serves stays Running and not Ready, which no
// simulated node would show.
func TestLoopRealNodeRunsPodsWhoseReadinessIsReal(t *testing.T) {
	skipWithoutLoop(t)
	s := StartOpts(t, StackOptions{RealNode: true, ControlPlaneOnly: true})
	ctx := context.Background()
	image := s.Node.Registry + "/" + pauseImage
	pod := func(name string, probe *corev1.Probe) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "main", Image: image, ReadinessProbe: probe,
			}}},
		}
	}
	never := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9)}}, PeriodSeconds: 1}
	start := time.Now()
	for _, p := range []*corev1.Pod{pod("ready", nil), pod("never-ready", never)} {
		if err := s.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *corev1.Pod {
		p := &corev1.Pod{}
		_ = s.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, p)
		return p
	}
	poll(t, 2*time.Minute, "pod ready Ready on the real node", func() (bool, string) {
		p := get("ready")
		return podReady(p), podState(p)
	})
	t.Logf("pod create -> Ready on the real node: %s", time.Since(start).Round(time.Millisecond))
	poll(t, 2*time.Minute, "pod never-ready Running", func() (bool, string) {
		p := get("never-ready")
		return p.Status.Phase == corev1.PodRunning, podState(p)
	})
	// Several probe periods: still not Ready.
	time.Sleep(5 * time.Second)
	if p := get("never-ready"); podReady(p) || p.Spec.NodeName != nodeName {
		t.Fatalf("pod never-ready: %s", podState(p))
	}

	// The pods' gateway keeps its hardware address while ports come and
	// go: a port with a lower address than any pod's joins the bridge and
	// leaves it (a bridge whose address was never set would take it, and
	// every pod's ARP entry for the gateway would then name a gone port).
	want, err := bridgeMAC(nodeGateway)
	if err != nil {
		t.Fatal(err)
	}
	bridgeAddr := func(when string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("/sys/class/net", nodeBridge, "address"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != want {
			t.Fatalf("%s: bridge %s has address %s, want %s", when, nodeBridge, got, want)
		}
	}
	bridgeAddr("with two pods")
	const port, peer = "scribe-mac0", "scribe-mac1"
	t.Cleanup(func() { _ = runQuiet("ip", "link", "del", port) })
	for _, args := range [][]string{
		{"link", "add", port, "address", "02:00:00:00:00:01", "type", "veth", "peer", "name", peer},
		{"link", "set", port, "master", nodeBridge},
		{"link", "set", port, "up"},
	} {
		if err := runQuiet("ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	bridgeAddr("a port with a lower address joined")
	if err := runQuiet("ip", "link", "del", port); err != nil {
		t.Fatal(err)
	}
	bridgeAddr("that port left")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("node %q phase %s ready %v", p.Spec.NodeName, p.Status.Phase, podReady(p))
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting %s: %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf("; %s terminated %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		}
	}
	return s
}
