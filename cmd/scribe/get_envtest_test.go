package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/crds/crdstest"
)

// TestGetShowsAndWatchesAWorkloadOnAnAPIServer runs scribe get against a
// real API server: the tree of a Workload mid-canary with the revision its
// Flux Kustomization reports, the printer columns, and --watch redrawing
// on a status change (and only on a change of what it shows), on a new
// revision the Kustomization reports, saying the Workload was deleted, and
// stopping on cancel.
func TestGetShowsAndWatchesAWorkloadOnAnAPIServer(t *testing.T) {
	upstream := crdstest.Files(t, "flux-kustomize")
	env, cfg := startAPIServer(t, upstream...)
	admin := adminClient(t, cfg)
	ctx := context.Background()

	// The Workload mid-canary (step 2 of 3, weight 50) of the fixture, and
	// its Flux Kustomization reporting the commit applied.
	w := canaryFixture(t)
	w.Namespace = "default"
	status := w.Status
	const commit = "0123456789abcdef0123456789abcdef01234567"
	status.Revision = commit
	status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing",
		Message: "step 2 of v2 healthy\x1b[31m; holding", LastTransitionTime: metav1.Now()}}
	status.GeneratedResources = &scribev1.GeneratedResources{Path: "default/workload/checkout", Objects: []scribev1.ObjectIdentity{
		{APIVersion: kustomizev1.GroupVersion.String(), Kind: "Kustomization", Namespace: "default", Name: "checkout"}}}
	if err := admin.Create(ctx, &w); err != nil {
		t.Fatal(err)
	}
	w.Status = status
	if err := admin.Status().Update(ctx, &w); err != nil {
		t.Fatal(err)
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "checkout",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "scribe", "scribe.dev/kind": "Workload"}},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Minute}, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "deploy"}}}
	if err := admin.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	ks.Status.LastAppliedRevision = "main@sha1:" + commit
	if err := admin.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}

	// The user's kubeconfig, found through $KUBECONFIG as kubectl does;
	// the namespace is its context's (default).
	kubeconfig := userKubeconfig(t, env, envtest.User{Name: "reader", Groups: []string{"system:masters"}})
	t.Setenv("KUBECONFIG", kubeconfig)
	code, out, stderr := scribe(t, "get", "wl", "checkout")
	if code != exitOK {
		t.Fatalf("scribe get wl checkout: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"Workload:     default/checkout\n",
		"Step:         2 of 3 (weight 50, pause 5m0s)\n",
		"├── v1  stable  weight 50\n└── v2  canary  weight 50\n",
		"Revision:     " + commit + "\n",
		"Applied:      main@sha1:" + commit + " (Kustomization default/checkout)\n",
		`healthy\x1b[31m; holding`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scribe get wl checkout does not show %q:\n%s", want, out)
		}
	}
	if code, out, stderr := scribe(t, "get", "pipelines", "-A"); code != exitOK || out != "No Pipelines found in any namespace.\n" {
		t.Errorf("scribe get pipelines -A: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, _, stderr := scribe(t, "get", "wl", "nothing"); code != exitError || !strings.Contains(stderr, `"nothing" not found`) {
		t.Errorf("scribe get wl nothing: exit %d, stderr %q; want %d and not found", code, stderr, exitError)
	}
	checkPrinterColumns(t, cfg, map[string]any{"Step": float64(1), "Weight": float64(50)})

	// --watch: the first frame, then one frame per change of what it shows.
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, werr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(watchCtx, []string{"get", "workload", "checkout", "--watch", "--kubeconfig", kubeconfig, "-n", "default"}, &stdout, &werr)
	}()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !strings.Contains(stdout.String(), what) {
			select {
			case code := <-done:
				t.Fatalf("scribe get --watch exited with %d while waiting for %q; stderr:\n%s\nstdout:\n%s", code, what, werr.String(), stdout.String())
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("scribe get --watch never showed %q; stderr:\n%s\nstdout:\n%s", what, werr.String(), stdout.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("Step:         2 of 3")
	update := func(change func(*scribev1.Workload), status bool) {
		t.Helper()
		var cur scribev1.Workload
		if err := admin.Get(ctx, client.ObjectKeyFromObject(&w), &cur); err != nil {
			t.Fatal(err)
		}
		change(&cur)
		up := admin.Update
		if status {
			up = func(ctx context.Context, o client.Object, _ ...client.UpdateOption) error {
				return admin.Status().Update(ctx, o)
			}
		}
		if err := up(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	// A change that the tree does not show draws nothing.
	update(func(w *scribev1.Workload) { w.Labels = map[string]string{"team": "shop"} }, false)
	update(func(w *scribev1.Workload) {
		w.Status.Step = 2
		w.Status.Traffic = []scribev1.VersionWeight{{Version: "v1", Weight: 0}, {Version: "v2", Weight: 100}}
	}, true)
	waitFor("Step:         3 of 3 (weight 100)")
	if n := strings.Count(stdout.String(), "Workload:"); n != 2 {
		t.Errorf("--watch drew %d frames for one change of what it shows (and one it does not), want 2:\n%s", n, stdout.String())
	}
	// The applier reports a new revision: the watch of the Kustomization
	// redraws, nothing of the Workload changed.
	const next = "89abcdef0123456789abcdef0123456789abcdef"
	if err := admin.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
		t.Fatal(err)
	}
	ks.Status.LastAppliedRevision = "main@sha1:" + next
	if err := admin.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
	waitFor("Applied:      main@sha1:" + next + " (Kustomization default/checkout)\n")
	if err := admin.Delete(ctx, &w); err != nil {
		t.Fatal(err)
	}
	waitFor("Workload default/checkout: deleted\n")

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("scribe get --watch: exit %d after cancel, want 0; stderr:\n%s", code, werr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("scribe get --watch did not stop after cancel")
	}
	if strings.ContainsRune(stdout.String(), '\x1b') {
		t.Errorf("--watch wrote an escape character (from status, or a screen clear on a non-terminal):\n%q", stdout.String())
	}
}

// checkPrinterColumns reads the Workloads as kubectl get does (a Table)
// and checks the cells of the one row under the named columns.
func checkPrinterColumns(t *testing.T, cfg *rest.Config, want map[string]any) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/apis/"+scribev1.GroupVersion.String()+"/namespaces/default/workloads", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("table of Workloads: %s: %d %v: %s", req.URL, resp.StatusCode, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table of Workloads: %d rows, want 1", len(table.Rows))
	}
	for i, col := range table.ColumnDefinitions {
		if w, ok := want[col.Name]; ok {
			if got := table.Rows[0].Cells[i]; fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("printer column %s = %v, want %v", col.Name, got, w)
			}
			delete(want, col.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("the Workload CRD has no printer columns %v", want)
	}
}
