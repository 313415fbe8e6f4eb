package controller_test

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// The CRDs bound what one object may ask the controller to render: an
// Experiment's targets (32), components per target (64) and across its
// targets (256), a Workload's versions (8). The API server refuses more,
// naming the limit, and accepts an object at each limit.
func TestCRDsBoundTargetsComponentsAndVersions(t *testing.T) {
	e := testEnv(t)
	ctx := t.Context()
	ns := e.namespace(t, "crd-limits-")
	experiment := func(targets, components int) *scribev1.Experiment {
		x := &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "x-"}}
		for i := range targets {
			tg := scribev1.Target{Name: fmt.Sprintf("t%d", i), Cluster: scribev1.ClusterSpec{Type: scribev1.ClusterHub}}
			for j := range components {
				tg.Components = append(tg.Components, scribev1.Component{Config: fmt.Sprintf("c%d", j)})
			}
			x.Spec.Targets = append(x.Spec.Targets, tg)
		}
		return x
	}
	withVersions := func(n int) *scribev1.Workload {
		w := workload(ns.Name)
		w.Name, w.GenerateName = "", "w-"
		for i := range n {
			w.Spec.Versions = append(w.Spec.Versions, version(fmt.Sprintf("v%d", i)))
		}
		return w
	}
	for _, tc := range []struct {
		name    string
		obj     func() *scribev1.Experiment
		w       *scribev1.Workload
		refused string // "" when accepted
	}{
		{"32 targets of 8 components", func() *scribev1.Experiment { return experiment(32, 8) }, nil, ""},
		{"4 targets of 64 components", func() *scribev1.Experiment { return experiment(4, 64) }, nil, ""},
		{"33 targets", func() *scribev1.Experiment { return experiment(33, 1) }, nil, "spec.targets: Too many: 33: must have at most 32 items"},
		{"65 components on a target", func() *scribev1.Experiment { return experiment(1, 65) }, nil, "must have at most 64 items"},
		{"5 targets of 52 components", func() *scribev1.Experiment { return experiment(5, 52) }, nil, "at most 256 components across all its targets"},
		{"8 versions", nil, withVersions(8), ""},
		{"9 versions", nil, withVersions(9), "spec.versions: Too many: 9: must have at most 8 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.w != nil {
				err = e.c.Create(ctx, tc.w)
			} else {
				err = e.c.Create(ctx, tc.obj())
			}
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("create = %v, want Invalid with %q", err, tc.refused)
			}
		})
	}
}
