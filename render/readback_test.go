package render_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
	"github.com/scribe-gitops/scribe/render/contract"
)

// readBackSummary is one line per object the controller reads back.
func readBackSummary(rb contract.ReadBack) string {
	ref := func(r *contract.ObjectRef) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%s %s/%s/%s", r.APIVersion, r.Kind, r.Namespace, r.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sync: %s\n", ref(&rb.Sync))
	for _, d := range rb.Deployments {
		fmt.Fprintf(&b, "deployment %s: %s\n", d.Version, ref(&d.Deployment))
	}
	for _, t := range rb.Targets {
		fmt.Fprintf(&b, "target %s: cluster %s, kubeconfig %q\n", t.Name, ref(t.Cluster), t.KubeconfigSecret)
		for _, c := range t.Components {
			fmt.Fprintf(&b, "  component %s: %s\n", c.Name, ref(c.Delivery))
		}
	}
	for _, c := range rb.Templates {
		fmt.Fprintf(&b, "template %s: %s\n", c.Name, ref(c.Delivery))
	}
	for i := range rb.Runs {
		fmt.Fprintf(&b, "run %s/%s: %s\n", rb.Runs[i].Target, rb.Runs[i].Component, ref(&rb.Runs[i].Workflow))
	}
	fmt.Fprintf(&b, "workflow: %s\n", ref(rb.Workflow))
	return b.String()
}

func TestReadBackNamesTheRenderedObjectsTheControllerFollows(t *testing.T) {
	e := newEngine(t)
	want := map[string][]string{ // kinds allowed per role
		"deployment": {"Deployment"},
		"cluster":    {"Cluster", "HelmRelease"},
		"delivery":   {"Kustomization", "HelmRelease", "Application"},
		"workflow":   {"Workflow", "TestWorkflowExecution"},
	}
	for _, file := range validFixtures(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			b := renderFile(t, e, file)
			rb := b.ReadBack
			inBundle := func(role string, r *contract.ObjectRef) {
				t.Helper()
				if r == nil {
					return
				}
				if !slices.Contains(b.Objects, r.Identity()) {
					t.Errorf("%s %s/%s is not among the rendered objects", role, r.Kind, r.Name)
				}
				if !slices.Contains(want[role], r.Kind) {
					t.Errorf("%s is a %s, want one of %v", role, r.Kind, want[role])
				}
			}
			if rb.Sync.Identity() != b.Sync {
				t.Errorf("readBack.sync %v, the sync object is %v", rb.Sync.Identity(), b.Sync)
			}
			for i := range rb.Deployments {
				inBundle("deployment", &rb.Deployments[i].Deployment)
			}
			for _, tg := range rb.Targets {
				inBundle("cluster", tg.Cluster)
				for _, c := range tg.Components {
					if c.Delivery == nil {
						t.Errorf("target %s component %s has no delivery", tg.Name, c.Name)
					}
					inBundle("delivery", c.Delivery)
				}
			}
			inBundle("workflow", rb.Workflow)
			for _, c := range rb.Templates {
				if c.Delivery == nil {
					t.Errorf("workflow template %s has no delivery", c.Name)
				}
				inBundle("delivery", c.Delivery)
			}
			for i := range rb.Runs {
				inBundle("workflow", &rb.Runs[i].Workflow)
			}

			golden := filepath.Join("testdata", "readback", name+".txt")
			got := readBackSummary(rb)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantText, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(wantText) {
				t.Errorf("read-back differs from %s:\n--- want\n%s--- got\n%s", golden, wantText, got)
			}
		})
	}
}

func TestReadBackOfATypedWorkloadInputFollowsItsRenderedVersions(t *testing.T) {
	e := newEngine(t)
	w := &scribev1.Workload{}
	w.Name, w.Namespace = "web", "team-a"
	w.Spec.Service.Name = "frontend"
	w.Spec.Service.Ports = []scribev1.ServicePort{{Name: "http", Port: 8080}}
	w.Spec.Versions = []scribev1.Version{{Name: "v1", Image: "example/web:1"}, {Name: "v2", Image: "example/web:2"}}
	b, err := e.RenderWorkload(t.Context(), render.WorkloadInput{
		Workload: w,
		Traffic:  []scribev1.VersionWeight{{Version: "v1", Weight: 90}, {Version: "v2", Weight: 10}},
		Publish:  render.DefaultPublish(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range b.ReadBack.Deployments {
		got = append(got, d.Version+"="+d.Deployment.Name)
	}
	if want := []string{"v1=frontend-v1", "v2=frontend-v2"}; !slices.Equal(got, want) {
		t.Errorf("deployments %v, want %v (named by the template from service.name)", got, want)
	}
}

func newEngine(t *testing.T) *render.Engine {
	t.Helper()
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	return e
}
