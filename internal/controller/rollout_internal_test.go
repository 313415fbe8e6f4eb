package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func TestRolloutStrategiesGiveTheirTrafficSteps(t *testing.T) {
	hold := &metav1.Duration{Duration: time.Minute}
	for _, tc := range []struct {
		name    string
		rollout *scribev1.Rollout
		want    []string // traffic per step
		pause0  time.Duration
	}{
		{"no rollout switches at once", nil, []string{"v1=0%,v2=100%"}, 0},
		{"canary walks its steps", &scribev1.Rollout{Strategy: scribev1.StrategyCanary, Steps: []scribev1.RolloutStep{{Weight: 10, Pause: hold}, {Weight: 50}, {Weight: 100}}},
			[]string{"v1=90%,v2=10%", "v1=50%,v2=50%", "v1=0%,v2=100%"}, time.Minute},
		{"canary without steps switches at once", &scribev1.Rollout{Strategy: scribev1.StrategyCanary}, []string{"v1=0%,v2=100%"}, 0},
		{"blue-green runs the new version dark, then switches", &scribev1.Rollout{Strategy: scribev1.StrategyBlueGreen, Steps: []scribev1.RolloutStep{{Weight: 100, Pause: hold}}},
			[]string{"v1=100%,v2=0%", "v1=0%,v2=100%"}, time.Minute},
		{"rolling has no split", &scribev1.Rollout{Strategy: scribev1.StrategyRolling}, []string{"v2=100%"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &scribev1.Workload{Spec: scribev1.WorkloadSpec{Rollout: tc.rollout}, Status: scribev1.WorkloadStatus{StableVersion: "v1", CanaryVersion: "v2"}}
			var got []string
			for i := range steps(w) {
				got = append(got, fmtTraffic(stepTraffic(w, i)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("steps = %v, want %v", got, tc.want)
			}
			if p := pause(w, 0); p != tc.pause0 {
				t.Errorf("first pause = %s, want %s", p, tc.pause0)
			}
		})
	}
}
