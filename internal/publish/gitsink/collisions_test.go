package gitsink_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
	"github.com/scribe-gitops/scribe/render"
)

// obj is an object a test bundle renders.
type obj struct{ apiVersion, kind, namespace, name string }

// objectBundle builds a Workload's bundle rendering objs, one file each,
// with its sync object named as render names it (workload-<ns>-<name> in
// flux-system), shaped as render makes it.
func objectBundle(ns, name, rev string, objs ...obj) *render.Bundle {
	src := scribev1.ObjectIdentity{APIVersion: scribev1.GroupVersion.String(), Kind: "Workload", Namespace: ns, Name: name}
	dir := publish.OwnedDir(src)
	b := &render.Bundle{Dir: dir, Source: src, Generation: 1, Digest: "sha256:" + fmt.Sprintf("%064x", len(rev)+len(name))}
	b.Files = append(b.Files, render.File{Path: dir + "/.scribe.json",
		Data: []byte(fmt.Sprintf(`{"apiVersion":"scribe.dev/v1alpha1","kind":"Provenance","source":{"apiVersion":"scribe.dev/v1alpha1","kind":"Workload","namespace":%q,"name":%q}}`+"\n", ns, name))})
	var resources []string
	for _, o := range objs {
		file := strings.ToLower(o.kind) + "-" + o.name + ".yaml"
		data := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n", o.apiVersion, o.kind, o.name)
		if o.namespace != "" {
			data += "  namespace: " + o.namespace + "\n"
		}
		data += "data:\n  rev: " + rev + "\n"
		b.Files = append(b.Files, render.File{Path: dir + "/" + file, Data: []byte(data)})
		b.Objects = append(b.Objects, scribev1.ObjectIdentity{APIVersion: o.apiVersion, Kind: o.kind, Namespace: o.namespace, Name: o.name})
		resources = append(resources, "- "+file)
	}
	b.Files = append(b.Files, render.File{Path: dir + "/kustomization.yaml", Data: []byte("resources:\n" + strings.Join(resources, "\n") + "\n")})
	b.Sync = scribev1.ObjectIdentity{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "flux-system", Name: "workload-" + ns + "-" + name}
	b.Files = append(b.Files, render.File{Path: dir + ".sync.yaml",
		Data: []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: workload-" + ns + "-" + name + "\n  namespace: flux-system\nspec:\n  path: ./" + dir + "\n")})
	return b
}

var checkoutService = obj{"v1", "Service", "shop", "checkout"}

func wantConflict(t *testing.T, err error, says ...string) {
	t.Helper()
	var pe *publish.Error
	if !errors.As(err, &pe) || pe.Reason != publish.ReasonObjectConflict {
		t.Fatalf("publish = %v (reason %s), want %s", err, publish.ReasonOf(err), publish.ReasonObjectConflict)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

func TestGitRefusesAnObjectAnotherCustomResourcePublishes(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "shop", "main")
	g := gitsink.New(t.TempDir())
	g.CommitInterval = 0
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters", SyncIndex: true})
	checkout := objectBundle("shop", "checkout", "1", checkoutService, obj{"apps/v1", "Deployment", "shop", "checkout"})
	if _, err := sink.Publish(ctx, publish.ChangeFor(checkout)); err != nil {
		t.Fatal(err)
	}
	head := func() string { return publishtest.Git(t, clone(t, url, "main"), "rev-parse", "HEAD") }
	before := head()

	t.Run("a Service named like another Workload's is refused, naming both", func(t *testing.T) {
		attacker := objectBundle("shop", "attacker", "1", obj{"v1", "Service", "shop", "checkout"})
		_, err := sink.Publish(ctx, publish.ChangeFor(attacker))
		wantConflict(t, err, "Workload shop/attacker", "Workload shop/checkout", "Service shop/checkout", "clusters/shop/workload/checkout/", "service-checkout.yaml")
		if h := head(); h != before {
			t.Fatalf("the refused change was committed: %s", h)
		}
	})
	t.Run("a fresh publisher (a new process) finds the collision too", func(t *testing.T) {
		fresh := newSink(t, gitsink.New(t.TempDir()), gitsink.Options{URL: url, Branch: "main", Path: "clusters", SyncIndex: true})
		_, err := fresh.Publish(ctx, publish.ChangeFor(objectBundle("shop", "attacker", "1", checkoutService)))
		wantConflict(t, err, "Workload shop/checkout")
	})
	t.Run("the same name in another group, kind or namespace is no collision", func(t *testing.T) {
		other := objectBundle("shop", "other", "1",
			obj{"serving.knative.dev/v1", "Service", "shop", "checkout"},
			obj{"v1", "ConfigMap", "shop", "checkout"},
			obj{"v1", "Service", "shop-dev", "checkout"})
		if _, err := sink.Publish(ctx, publish.ChangeFor(other)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a custom resource republishing its own objects is no collision", func(t *testing.T) {
		res, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop", "checkout", "2", checkoutService, obj{"apps/v1", "Deployment", "shop", "checkout"})))
		if err != nil || !res.Changed {
			t.Fatalf("republish = %+v, %v", res, err)
		}
	})
	t.Run("the same object under another repository path is no collision", func(t *testing.T) {
		dev := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters-dev", SyncIndex: true})
		if _, err := dev.Publish(ctx, publish.ChangeFor(objectBundle("shop", "attacker", "1", checkoutService))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("files shaped like an owned directory without Scribe's provenance are nobody's", func(t *testing.T) {
		work := clone(t, url, "main")
		if err := os.MkdirAll(filepath.Join(work, "clusters/shop/workload/legacy"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "clusters/shop/workload/legacy/service.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: legacy\n  namespace: shop\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		publishtest.Git(t, work, "add", ".")
		publishtest.Git(t, work, "commit", "--quiet", "-m", "hand-written legacy Service")
		publishtest.Git(t, work, "push", "--quiet", "origin", "main")
		if _, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop", "successor", "1", obj{"v1", "Service", "shop", "legacy"}))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("sync objects collide too", func(t *testing.T) {
		// workload-shop-a-b: Workload shop/a-b and Workload shop-a/b.
		if _, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop", "a-b", "1"))); err != nil {
			t.Fatal(err)
		}
		_, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop-a", "b", "1")))
		wantConflict(t, err, "Kustomization.kustomize.toolkit.fluxcd.io flux-system/workload-shop-a-b", "Workload shop/a-b")
	})
	t.Run("a delete in the same call frees the object", func(t *testing.T) {
		taker := objectBundle("shop", "taker", "1", checkoutService)
		if _, err := sink.Publish(ctx, publish.DeleteFor(checkout.Source, 3), publish.ChangeFor(taker)); err != nil {
			t.Fatal(err)
		}
		work := clone(t, url, "main")
		if data := readFile(t, filepath.Join(work, "clusters/shop/workload/taker/service-checkout.yaml")); !strings.Contains(data, "name: checkout") {
			t.Fatalf("taker's Service = %q", data)
		}
	})
}

func TestGitCollisionsWithinABatch(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "batch", "main")
	g := gitsink.New(t.TempDir())
	g.CommitInterval = 0
	sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters"})

	t.Run("two changes of one call rendering one object fail the call as a whole", func(t *testing.T) {
		a := objectBundle("shop", "a", "1", checkoutService)
		b := objectBundle("shop", "b", "1", checkoutService)
		_, err := sink.Publish(ctx, publish.ChangeFor(a), publish.ChangeFor(b))
		wantConflict(t, err, "Workload shop/b", "Workload shop/a, published in the same commit")
		if out := publishtest.Git(t, clone(t, url, "main"), "ls-tree", "-r", "--name-only", "HEAD"); strings.Contains(out, "clusters/") {
			t.Fatalf("the refused call wrote %s", out)
		}
	})

	t.Run("a colliding call fails alone; the other calls of its commit land", func(t *testing.T) {
		if _, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop", "checkout", "1", checkoutService))); err != nil {
			t.Fatal(err)
		}
		// The next calls wait for the pacing interval and share a commit.
		g.CommitInterval = time.Second
		if _, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop", "warm", "1"))); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := map[string]error{}
		var mu sync.Mutex
		for _, b := range []*render.Bundle{
			objectBundle("shop", "attacker", "1", checkoutService),
			objectBundle("shop", "innocent", "1", obj{"v1", "Service", "shop", "innocent"}),
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := sink.Publish(ctx, publish.ChangeFor(b))
				mu.Lock()
				errs[b.Source.Name] = err
				mu.Unlock()
			}()
		}
		wg.Wait()
		wantConflict(t, errs["attacker"], "Workload shop/checkout")
		if errs["innocent"] != nil {
			t.Fatalf("innocent: %v", errs["innocent"])
		}
		out := publishtest.Git(t, clone(t, url, "main"), "ls-tree", "-r", "--name-only", "HEAD")
		if !strings.Contains(out, "clusters/shop/workload/innocent/service-innocent.yaml") || strings.Contains(out, "attacker") {
			t.Fatalf("tree after the batch:\n%s", out)
		}
	})
}

// TestGitPublishesToABranchThatDoesNotExistYet: a branch the remote does not
// have yet holds nothing to collide with, at the repository root and below a
// path (the collision check once read the zero tree as a damaged cache).
func TestGitPublishesToABranchThatDoesNotExistYet(t *testing.T) {
	ctx := context.Background()
	srv := publishtest.NewGitServer(t)
	url := srv.InitRepo(t, "shop", "main")
	for i, path := range []string{"", ".", "clusters"} {
		branch := fmt.Sprintf("feature-%d", i)
		sink := newSink(t, gitsink.New(t.TempDir()), gitsink.Options{URL: url, Branch: branch, Path: path, SyncIndex: true})
		res, err := sink.Publish(ctx, publish.ChangeFor(objectBundle("shop", "checkout", "1", checkoutService)))
		if err != nil || !res.Changed {
			t.Fatalf("path %s: publish to the new branch %s = %+v, %v", path, branch, res, err)
		}
		if got := publishtest.Git(t, clone(t, url, branch), "rev-parse", "HEAD"); got != res.Commit {
			t.Errorf("path %s: branch %s is at %s, want the published %s", path, branch, got, res.Commit)
		}
	}
}
