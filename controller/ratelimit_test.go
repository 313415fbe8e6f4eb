package controller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/scribe-gitops/scribe/controller"
)

// The client-side rate limit follows the API server: none behind priority
// and fairness (a real kube-apiserver has it by default), Flux's defaults
// without it or when it cannot be told, and explicit values always.
func TestClientRateLimitFollowsTheAPIServersPriorityAndFairness(t *testing.T) {
	e := testEnv(t)
	noAPF := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(noAPF.Close)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	down.Close()

	tests := []struct {
		name      string
		cfg       *rest.Config
		explicit  bool
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
		says      string
	}{
		{name: "kube-apiserver with priority and fairness", cfg: rest.CopyConfig(e.cfg),
			wantQPS: -1, wantBurst: -1, says: "no client-side limit"},
		{name: "explicit flags win over priority and fairness", cfg: rest.CopyConfig(e.cfg), explicit: true, qps: 20, burst: 40,
			wantQPS: 20, wantBurst: 40, says: "as set"},
		{name: "server without priority and fairness", cfg: &rest.Config{Host: noAPF.URL},
			wantQPS: controller.DefaultKubeAPIQPS, wantBurst: controller.DefaultKubeAPIBurst, says: "has no priority and fairness"},
		{name: "server that cannot be asked", cfg: &rest.Config{Host: down.URL},
			wantQPS: controller.DefaultKubeAPIQPS, wantBurst: controller.DefaultKubeAPIBurst, says: "not detected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := controller.ClientRateLimit(context.Background(), tt.cfg, tt.qps, tt.burst, tt.explicit)
			if tt.cfg.QPS != tt.wantQPS || tt.cfg.Burst != tt.wantBurst {
				t.Errorf("QPS %v burst %d, want %v and %d", tt.cfg.QPS, tt.cfg.Burst, tt.wantQPS, tt.wantBurst)
			}
			if !strings.Contains(got, tt.says) {
				t.Errorf("says %q, want it to say %q", got, tt.says)
			}
		})
	}
}
