package render_test

import (
	"context"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// TestCanaryStepsNeedTraffic: a canary's weights are the HTTPRoute's
// backend weights, so a canary of more than one step without spec.traffic
// is refused (the CLI's validate and render, the controller's render, and
// the API server by the same CRD rule), naming spec.traffic; what moves no
// traffic by weight is accepted without it.
func TestCanaryStepsNeedTraffic(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	const traffic = "  traffic: {parentRefs: [{name: public, namespace: gateway-system}]}\n"
	tests := []struct {
		name    string
		spec    string
		refused bool
	}{
		{"canary steps without traffic", "  rollout: {strategy: canary, steps: [{weight: 10}, {weight: 50}, {weight: 100}]}\n", true},
		{"canary steps, the strategy defaulted", "  rollout: {steps: [{weight: 50}, {weight: 100}]}\n", true},
		{"canary steps with traffic", traffic + "  rollout: {strategy: canary, steps: [{weight: 10}, {weight: 100}]}\n", false},
		{"a canary of one step (all at once)", "  rollout: {strategy: canary, steps: [{weight: 100}]}\n", false},
		{"a canary without steps", "  rollout: {strategy: canary}\n", false},
		{"no rollout", "", false},
		{"rolling", "  rollout: {strategy: rolling, steps: [{weight: 50}, {weight: 100}]}\n", false},
		{"blue-green", "  rollout: {strategy: blueGreen, steps: [{weight: 100}]}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: scribe.dev/v1alpha1\nkind: Workload\nmetadata: {name: web, namespace: demo}\nspec:\n" +
				"  versions: [{name: v1, image: nginx:1.27}]\n  service: {ports: [{name: http, port: 80}]}\n" + tt.spec
			objs, err := render.ObjectsFromYAML([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Render(context.Background(), render.Input{Object: objs[0], Publish: render.DefaultPublish(), Resolved: testResolved})
			switch {
			case tt.refused && err == nil:
				t.Fatal("rendered without error")
			case tt.refused && !strings.Contains(err.Error(), "spec.traffic: Invalid value: a canary with steps needs spec.traffic"):
				t.Fatalf("error does not name spec.traffic: %v", err)
			case !tt.refused && err != nil:
				t.Fatalf("refused: %v", err)
			}
		})
	}
}
