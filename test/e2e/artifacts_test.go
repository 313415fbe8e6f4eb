package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
)

// TestLoopAppliesEachCustomResourceFromItsOwnArtifact: with the
// Repository's spec.git.artifacts, the real Flux applies a Workload from
// the OCI artifact Scribe pushed for it alone, through its own
// OCIRepository, and Scribe reads it back by the commit the artifact
// names. A Workload applied from its own GitRepository before moves over
// (the root Kustomization replaces the source), and a change reaches the
// cluster at its new commit the same way.
func TestLoopAppliesEachCustomResourceFromItsOwnArtifact(t *testing.T) {
	t.Parallel()
	ns := "artifacts"
	s := newLoop(t, ns)
	ctx := context.Background()
	w := canaryWorkload(ns)
	w.Spec.Rollout = nil
	get := createHealthy(t, s, w)
	sync := types.NamespacedName{Namespace: "flux-system", Name: "workload." + ns + ".web"}
	if err := s.Client.Get(ctx, sync, &sourcev1.GitRepository{}); err != nil {
		t.Fatalf("before spec.git.artifacts the Workload's own source is a GitRepository: %v", err)
	}

	useArtifacts(t, s, ns)
	appliedFromArtifact := func(what string) string {
		var commit string
		poll(t, 3*time.Minute, what, func() (bool, string) {
			got := get()
			ks := &kustomizev1.Kustomization{}
			_ = s.Client.Get(ctx, sync, ks)
			commit = got.Status.Revision
			ok := got.Status.Phase == scribev1.WorkloadHealthy && ks.Spec.SourceRef.Kind == "OCIRepository" &&
				ks.Status.LastAppliedOriginRevision == "main@sha1:"+commit
			return ok, describe(got) + "\nKustomization source " + ks.Spec.SourceRef.Kind + ", applied " + ks.Status.LastAppliedRevision +
				" from " + ks.Status.LastAppliedOriginRevision + "\n--- source-controller: " + s.Logs("source-controller", 4)
		})
		return commit
	}
	first := appliedFromArtifact("the Workload applied from its own artifact and healthy")

	// The OCIRepository reads <url>/<sync name>:latest, and the artifact
	// holds the Workload's directory only, made from its commit.
	o := &sourcev1.OCIRepository{}
	if err := s.Client.Get(ctx, sync, o); err != nil {
		t.Fatal(err)
	}
	// <url>/<8 hex digits of the Git repository, branch and path>/<sync name>
	prefix, url := "oci://"+s.Registry+"/scribe/"+ns+"/", o.Spec.URL
	key, name, _ := strings.Cut(strings.TrimPrefix(url, prefix), "/")
	if !strings.HasPrefix(url, prefix) || len(key) != 8 || name != sync.Name || o.Status.Artifact == nil ||
		o.Status.Artifact.Metadata["org.opencontainers.image.revision"] != "main@sha1:"+first {
		t.Fatalf("OCIRepository %s at %+v, want %s<key>/%s carrying main@sha1:%s", url, o.Status.Artifact, prefix, sync.Name, first)
	}
	poll(t, time.Minute, "the Workload's GitRepository pruned", func() (bool, string) {
		err := s.Client.Get(ctx, sync, &sourcev1.GitRepository{})
		return apierrors.IsNotFound(err), "GitRepository still there"
	})
	sink, err := ocisink.New(ocisink.Options{URL: url, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := sink.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := SyncPath + "/" + ns + "/workload/web/"
	var paths []string
	for p := range files {
		if !strings.HasPrefix(p, dir) {
			t.Errorf("the artifact holds %s, outside the Workload's directory %s", p, dir)
		}
		paths = append(paths, p)
	}
	if !slices.Contains(paths, dir+"kustomization.yaml") {
		t.Fatalf("the artifact holds %v, no %skustomization.yaml", paths, dir)
	}

	// A change: a new commit, a new artifact, applied and read back.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get()
		cur.Spec.Versions[0].Config = map[string]string{"GREETING": "hello"}
		return s.Client.Update(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "a new commit for the change", func() (bool, string) {
		got := get()
		return got.Status.Revision != first && got.Status.ObservedGeneration == got.Generation, describe(got)
	})
	if second := appliedFromArtifact("the change applied from the Workload's new artifact"); second == first {
		t.Fatalf("the change was read back at the first commit %s", first)
	}
}
