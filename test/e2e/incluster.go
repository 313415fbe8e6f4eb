package e2e

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where the chart installs Scribe in a loop on the real node
// (InstallScribe, incluster_test.go).

const (
	// ScribeNamespace is where the chart installs Scribe in the loop.
	ScribeNamespace = "scribe-system"
	// ScribeRelease is the Helm release; the chart's names derive from it.
	ScribeRelease = "scribe"
)

// ScribePod is the running controller pod of the chart (the newest one).
func (s *Stack) ScribePod(ctx context.Context) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(ScribeNamespace),
		client.MatchingLabels{"app.kubernetes.io/instance": ScribeRelease, "app.kubernetes.io/name": "scribe"}); err != nil {
		return nil, err
	}
	var best *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no Scribe pod in %s", ScribeNamespace)
	}
	return best, nil
}
