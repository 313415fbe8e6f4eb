package e2e

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// testDeleteOneOfTwo (DeletingOneOfTwoKeepsTheOther, in
// TestLoopHubExperimentsValidatedByTheEngine): two hub Experiments in
// one namespace deliver the same catalog components (the demo services
// and the gateway-validation workflow with its RBAC) through the real
// applier, and the real Argo Workflows engine runs both validations to
// Complete. Each delivered its own objects (named per Experiment), only
// the catalog's Namespace demo is shared (applied by both Flux
// Kustomizations; under Argo CD created by each Application, never
// committed), and each one's Services select its own pods only. Deleting one prunes its own
// objects and leaves the other Complete with every object it delivered
// still in the apiserver, the shared Namespace included.
func testDeleteOneOfTwo(t *testing.T, s *Stack) {
	applier, ns := s.Applier, ownedNS
	ctx := context.Background()
	gone, kept := "gateway-gone", "gateway-kept"
	for _, name := range []string{gone, kept} {
		if err := s.Client.Create(ctx, validatedExperiment(ns, name, demoHTTPURL(ns, name), demoHTTPURL(ns, name))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{gone, kept} {
		e := waitExperimentFor(t, s, 8*time.Minute, ns, name, "Experiment "+name+" Complete", func(e *scribev1.Experiment) bool {
			return e.Status.Phase == scribev1.ExperimentComplete || e.Status.Phase == scribev1.ExperimentFailed
		})
		if e.Status.Phase != scribev1.ExperimentComplete {
			run := workflowOf(t, s, e)
			_, log := workflowPod(t, s, run)
			t.Fatalf("Experiment %s ended %s; its probe's log:\n%s", name, describeExperiment(e), log)
		}
	}

	// Each Experiment's Services serve its own pods only: the shared
	// namespace holds both Experiments' pods, and a selector without the
	// owner's label would pick the other's too (and, once it is deleted,
	// its terminating pods).
	for _, name := range []string{gone, kept} {
		for _, svc := range []string{"demo-http", "demo-grpc"} {
			ownPods := owned(ns, name, svc) + "-"
			poll(t, time.Minute, "Service "+owned(ns, name, svc)+"'s endpoints", func() (bool, string) {
				var slices discoveryv1.EndpointSliceList
				if err := s.Client.List(ctx, &slices, client.InNamespace("demo"), client.MatchingLabels{discoveryv1.LabelServiceName: owned(ns, name, svc)}); err != nil {
					return false, err.Error()
				}
				var pods, foreign []string
				for _, sl := range slices.Items {
					for _, ep := range sl.Endpoints {
						if ep.TargetRef == nil {
							continue
						}
						pods = append(pods, ep.TargetRef.Name)
						if !strings.HasPrefix(ep.TargetRef.Name, ownPods) {
							foreign = append(foreign, ep.TargetRef.Name)
						}
					}
				}
				if len(foreign) > 0 {
					t.Fatalf("Service %s of %s selects pods %v, not its Experiment's", owned(ns, name, svc), name, foreign)
				}
				return len(pods) > 0, fmt.Sprintf("endpoints %v", pods)
			})
		}
	}

	// What each delivered, from its directory on the branch: the objects
	// Scribe rendered and the hydrated components'.
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	goneObjs, keptObjs := committedObjects(t, work, ns, gone), committedObjects(t, work, ns, kept)
	shared := map[string]bool{}
	for id := range keptObjs {
		if _, both := goneObjs[id]; both {
			shared[id] = true
		}
	}
	// Flux applies the catalog's Namespace demo from both; under Argo CD
	// neither commits it (each Application creates it), so nothing is
	// shared.
	switch {
	case applier == scribev1.ApplierFlux && (len(shared) != 1 || !shared["Namespace//demo"]):
		t.Fatalf("the two Experiments both deliver %v; want only the shared Namespace//demo", keys(shared))
	case applier == scribev1.ApplierArgoCD && len(shared) != 0:
		t.Fatalf("the two Experiments both deliver %v; want nothing shared", keys(shared))
	}
	for id, o := range keptObjs {
		if err := s.Client.Get(ctx, objectKey(o), o.DeepCopy()); err != nil {
			t.Fatalf("before the deletion, %s (delivered by %s) is not in the apiserver: %v", id, kept, err)
		}
	}

	// Delete one; wait until the applier pruned what it alone delivered.
	if err := s.Client.Delete(ctx, &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gone}}); err != nil {
		t.Fatal(err)
	}
	poll(t, 4*time.Minute, "Experiment "+gone+" gone and its objects pruned by "+string(applier), func() (bool, string) {
		var left []string
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: gone}, &scribev1.Experiment{}); !apierrors.IsNotFound(err) {
			left = append(left, "the Experiment")
		}
		for id, o := range goneObjs {
			if shared[id] {
				continue
			}
			if err := s.Client.Get(ctx, objectKey(o), o.DeepCopy()); !apierrors.IsNotFound(err) {
				left = append(left, id)
			}
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left)
	})

	// The other one is untouched: every object it delivered, the shared
	// Namespace included, is in the apiserver, its demo Deployments
	// available, and it is still Complete.
	for id, o := range keptObjs {
		if err := s.Client.Get(ctx, objectKey(o), o.DeepCopy()); err != nil {
			t.Errorf("after deleting %s, %s (delivered by %s) is gone: %v", gone, id, kept, err)
		}
	}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: "demo"}, &corev1.Namespace{}); err != nil {
		t.Errorf("after deleting %s, the shared Namespace demo: %v", gone, err)
	}
	for _, name := range []string{"demo-http", "demo-grpc"} {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: "demo", Name: owned(ns, kept, name)}, d); err != nil || d.Status.AvailableReplicas < 1 {
			t.Errorf("after deleting %s, %s's Deployment %s: %v, %d available", gone, kept, owned(ns, kept, name), err, d.Status.AvailableReplicas)
		}
	}
	e := &scribev1.Experiment{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: kept}, e); err != nil {
		t.Fatal(err)
	}
	if e.Status.Phase != scribev1.ExperimentComplete {
		t.Errorf("after deleting %s, %s is %s", gone, kept, describeExperiment(e))
	}
	t.Logf("%s: %s and %s delivered %d and %d objects, sharing %v; deleting %s pruned its own %d and kept all of %s's",
		applier, gone, kept, len(goneObjs), len(keptObjs), keys(shared), gone, len(goneObjs)-len(shared), kept)
}

// committedObjects reads the objects Experiment ns/name's directory holds
// at the head of the clone in work (its rendered objects and its hydrated
// components; not the kustomization.yaml files, nor .scribe.json), by
// kind/namespace/name.
func committedObjects(t *testing.T, work, ns, name string) map[string]*unstructured.Unstructured {
	t.Helper()
	dir := SyncPath + "/" + ns + "/experiment/" + name
	out := map[string]*unstructured.Unstructured{}
	for _, f := range strings.Fields(publishtest.Git(t, work, "ls-tree", "-r", "--name-only", "HEAD", "--", dir)) {
		if path.Ext(f) != ".yaml" || path.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, doc := range strings.Split(publishtest.Git(t, work, "show", "HEAD:"+f), "\n---\n") {
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	if len(out) == 0 {
		t.Fatalf("no objects under %s", dir)
	}
	return out
}

func objectKey(u *unstructured.Unstructured) types.NamespacedName {
	return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
