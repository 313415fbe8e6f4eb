package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Real traffic on the real node: Traefik (hack/build-traefik.sh) runs on
// the host as the loop's Gateway API implementation, and Prometheus
// (hack/build-prometheus.sh) scrapes the pods. Both are built from the Go
// module proxy, outside Scribe's go.mod, and run as the loop's processes.
//
//   - Traefik's kubernetesgateway provider reads the loop's API server
//     (KUBECONFIG), owns the GatewayClass TraefikClassName, serves the
//     Gateway gateway-system/public on its entrypoint at 127.0.0.1 (the
//     listener's port is the entrypoint's: Traefik matches them by port),
//     writes the HTTPRoutes' status itself and proxies to the pods'
//     addresses on the bridge (EndpointSlices).
//   - Prometheus discovers the pods through kubernetes_sd_configs (role
//     pod, the same KUBECONFIG), scrapes every container port named
//     "http" of a Workload's pod each second, and listens on the bridge's
//     gateway, where Scribe's pod queries it.
//   - LoadGen sends steady requests through Traefik's entrypoint; the demo
//     app answers with its version, so the share each version served is
//     measured where a client sees it.

// Traefik's GatewayClass and the controller name its provider serves.
const (
	TraefikClassName  = "traefik"
	TraefikController = "traefik.io/gateway-controller"
)

// realGateway is the loop's Traefik.
type realGateway struct {
	// addr is the entrypoint, host:port on 127.0.0.1.
	addr string
	port int64
}

// startTraefik runs Traefik for the loop and creates its GatewayClass and
// the Gateway gateway-system/public with a listener on its entrypoint.
func (s *Stack) startTraefik(ctx context.Context) error {
	bin, err := buildDir(s.logf, "build-traefik.sh")
	if err != nil {
		return err
	}
	addr, err := s.addr()
	if err != nil {
		return err
	}
	_, p, _ := net.SplitHostPort(addr)
	var port int64
	if _, err := fmt.Sscan(p, &port); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`global:
  checkNewVersion: false
  sendAnonymousUsage: false
log:
  level: INFO
entryPoints:
  web:
    address: %q
providers:
  kubernetesGateway:
    throttleDuration: 100ms
    statusAddress:
      ip: 127.0.0.1
`, addr)
	path := filepath.Join(s.Dir, "traefik.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := s.run("traefik", bin, []string{"KUBECONFIG=" + s.Kubeconfig}, "--configfile="+path); err != nil {
		return err
	}
	s.gateway = &realGateway{addr: addr, port: port}
	gc := gatewayObject("GatewayClass")
	gc.SetName(TraefikClassName)
	_ = unstructured.SetNestedField(gc.Object, TraefikController, "spec", "controllerName")
	gw := gatewayObject("Gateway")
	gw.SetNamespace(GatewayNamespace)
	gw.SetName(GatewayName)
	gw.Object["spec"] = map[string]any{
		"gatewayClassName": TraefikClassName,
		"listeners": []any{map[string]any{
			"name": "http", "port": port, "protocol": "HTTP",
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
		}},
	}
	for _, o := range []*unstructured.Unstructured{gc, gw} {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	// Traefik programs the Gateway once its provider has synced.
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got := gatewayObject("Gateway")
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: GatewayNamespace, Name: GatewayName}, got); err != nil {
			last = err.Error()
			continue
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		last = fmt.Sprint(conds)
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Programmed" && cm["status"] == "True" {
				s.logf("gateway: Traefik serves Gateway %s/%s on %s", GatewayNamespace, GatewayName, addr)
				return nil
			}
		}
	}
	return fmt.Errorf("traefik did not program Gateway %s/%s within 60s (conditions %s); its log:\n%s", GatewayNamespace, GatewayName, last, s.Logs("traefik", 30))
}

// GatewayAddr is the address clients send the Gateway's traffic to
// (Traefik's entrypoint), or "" where the gateway is played.
func (s *Stack) GatewayAddr() string {
	if s.gateway == nil {
		return ""
	}
	return s.gateway.addr
}

// AddRefusingGateway creates a second Gateway of the loop's real gateway,
// gateway-system/<name>, whose listener admits routes of its own namespace
// only: a route of another namespace naming it is refused by Traefik
// (NotAllowedByListeners).
func (s *Stack) AddRefusingGateway(ctx context.Context, name string) error {
	if s.gateway == nil {
		return fmt.Errorf("no real gateway in this loop")
	}
	gw := gatewayObject("Gateway")
	gw.SetNamespace(GatewayNamespace)
	gw.SetName(name)
	gw.Object["spec"] = map[string]any{
		"gatewayClassName": TraefikClassName,
		"listeners": []any{map[string]any{
			"name": "http", "port": s.gateway.port, "protocol": "HTTP",
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "Same"}},
		}},
	}
	return s.Client.Create(ctx, gw)
}

// startPrometheus runs Prometheus scraping the loop's pods; its address
// (the bridge's gateway) goes into PrometheusURL.
func (s *Stack) startPrometheus() error {
	bin, err := buildDir(s.logf, "build-prometheus.sh")
	if err != nil {
		return err
	}
	addr, err := s.servedAddr()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: workload-pods
    kubernetes_sd_configs:
      - role: pod
        kubeconfig_file: %q
    relabel_configs:
      # A Workload's pods, at their container port named http.
      - source_labels: [__meta_kubernetes_pod_label_scribe_dev_workload]
        regex: .+
        action: keep
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: http
        action: keep
      - source_labels: [__meta_kubernetes_pod_phase]
        regex: Running
        action: keep
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
      - source_labels: [__meta_kubernetes_pod_label_scribe_dev_workload]
        target_label: workload
`, s.Kubeconfig)
	path := filepath.Join(s.Dir, "prometheus.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := s.run("prometheus", bin, nil, "--config.file="+path, "--web.listen-address="+addr,
		"--storage.tsdb.path="+filepath.Join(s.Dir, "prometheus-data"), "--storage.tsdb.retention.time=2h",
		"--log.level=info"); err != nil {
		return err
	}
	s.PrometheusURL = "http://" + addr
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := c.Get(s.PrometheusURL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.logf("prometheus: ready at %s", s.PrometheusURL)
				return nil
			}
		}
	}
	return fmt.Errorf("prometheus not ready at %s within 60s; its log:\n%s", s.PrometheusURL, s.Logs("prometheus", 30))
}

// PromQuery runs an instant query on the loop's Prometheus and returns
// the first sample's value as text, or "" when the result is empty.
func (s *Stack) PromQuery(ctx context.Context, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.PrometheusURL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", err
	}
	if body.Status != "success" {
		return "", fmt.Errorf("%s: %s", resp.Status, body.Error)
	}
	if len(body.Data.Result) == 0 || len(body.Data.Result[0].Value) != 2 {
		return "", nil
	}
	v, _ := body.Data.Result[0].Value[1].(string)
	return v, nil
}

// ProcessRSS is the resident memory of one of the loop's processes, in
// bytes (0 when it does not run).
func (s *Stack) ProcessRSS(name string) int64 {
	s.mu.Lock()
	cmd := s.named[name]
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	return int64(vmRSSKiB(cmd.Process.Pid)) * 1024
}

// Response is one answer the load generator got.
type Response struct {
	At      time.Time
	Version string // the demo app's version, "" when the body had none
	Code    int    // 0: the request failed
	Err     string // why the request failed, when it did
}

// LoadGen sends GET / with a Host header to an address at a steady rate
// and keeps every answer.
type LoadGen struct {
	mu     sync.Mutex
	got    []Response
	cancel context.CancelFunc
	done   chan struct{}
}

// StartLoad sends rate requests per second to addr for host until Stop.
func StartLoad(addr, host string, rate int) *LoadGen {
	ctx, cancel := context.WithCancel(context.Background())
	l := &LoadGen{cancel: cancel, done: make(chan struct{})}
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	c := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	go func() {
		defer close(l.done)
		defer tr.CloseIdleConnections()
		var wg sync.WaitGroup
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-t.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.record(l.one(ctx, c, addr, host))
			}()
		}
	}()
	return l
}

func (l *LoadGen) one(ctx context.Context, c *http.Client, addr, host string) Response {
	r := Response{At: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return r
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer func() { _ = resp.Body.Close() }()
	r.Code = resp.StatusCode
	var body struct {
		Version string `json:"version"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body) == nil {
		r.Version = body.Version
	}
	return r
}

func (l *LoadGen) record(r Response) {
	if r.At.IsZero() {
		return
	}
	l.mu.Lock()
	l.got = append(l.got, r)
	l.mu.Unlock()
}

// Stop ends the load and waits for the requests in flight.
func (l *LoadGen) Stop() {
	l.cancel()
	<-l.done
}

// Between returns the answers to requests sent in [from, to).
func (l *LoadGen) Between(from, to time.Time) []Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Response
	for _, r := range l.got {
		if !r.At.Before(from) && r.At.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// Shares is the share of answers each version gave (failed requests under
// "error"), and the count.
func Shares(rs []Response) (map[string]float64, int) {
	n := map[string]int{}
	for _, r := range rs {
		switch {
		case r.Code == 0 || r.Version == "":
			n["error"]++
		default:
			n[r.Version]++
		}
	}
	out := map[string]float64{}
	for k, v := range n {
		out[k] = float64(v) / float64(len(rs))
	}
	return out, len(rs)
}

// Failures counts the failed answers by status code or error.
func Failures(rs []Response) string {
	n := map[string]int{}
	for _, r := range rs {
		switch {
		case r.Code == 0:
			n[r.Err]++
		case r.Version == "":
			n[fmt.Sprintf("HTTP %d", r.Code)]++
		}
	}
	parts := make([]string, 0, len(n))
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%d× %s", v, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// FormatShares prints shares as "v1=90.0% v2=10.0%".
func FormatShares(sh map[string]float64) string {
	keys := make([]string, 0, len(sh))
	for k := range sh {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.1f%%", k, 100*sh[k]))
	}
	return strings.Join(parts, " ")
}
