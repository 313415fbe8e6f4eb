package render_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/scribe-gitops/scribe/render"
)

// testBound re-executes this test binary as the checker: render's init
// serves the check in the child before any test code runs, as it would in
// any program linking render. Its Timeout is CPU time.
func testBound(t *testing.T) render.CatalogBound {
	t.Helper()
	return render.CatalogBound{Command: []string{os.Args[0]}, Timeout: 8 * time.Second, Memory: 512 << 20}
}

func catalogFS(src string) fstest.MapFS {
	return fstest.MapFS{"entries.cue": {Data: []byte(src)}}
}

// TestCatalogBoundStopsRunawayCatalogs: a user catalog whose CUE takes
// unbounded memory or time fails in the child process as a CatalogError
// saying which bound, instead of taking the process down.
func TestCatalogBoundStopsRunawayCatalogs(t *testing.T) {
	for _, tt := range []struct {
		name, src string
	}{
		{"list.Range from the issue", `package catalog
import "list"
entries: {}
x: list.Range(0, 5e7, 1)
`},
		{"huge nested comprehension", `package catalog
import "list"
entries: {}
_x: [for i in list.Range(0, 100000, 1) for j in list.Range(0, 100000, 1) {i * j}]
`},
		{"hidden in an entry's #Params", `package catalog
import "list"
entries: big: {
	kind: "app"
	source: {type: "helm", repository: "https://charts.example.com", chart: "big", version: "1.0.0"}
	#Params: {n: *(len(list.Range(0, 5e7, 1))) | int}
}
`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := testBound(t)
			_, err := b.New(context.Background(), []render.Catalog{{Name: "./hostile", FS: catalogFS(tt.src)}})
			var ce *render.CatalogError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v (%T), want a CatalogError", err, err)
			}
			if ce.Reason != render.CatalogMemoryLimit && ce.Reason != render.CatalogTimeout {
				t.Errorf("reason %q, want memory limit or timeout: %v", ce.Reason, err)
			}
			if !strings.Contains(err.Error(), "./hostile") {
				t.Errorf("error does not name the catalog: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestCatalogBoundCountsCPUNotWallClock: the check's bound is the CPU
// time its evaluation uses, not the wall-clock time it takes, so an honest
// catalog passes however long the machine keeps its checker waiting (here
// a checker that starts only after its whole bound has passed, as on a
// machine busy with other work), while a catalog that computes without end
// stops once it used its CPU time, with little memory. A checker that
// makes no progress at all is stopped by the wall-clock backstop.
func TestCatalogBoundCountsCPUNotWallClock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the checker reads its CPU time on Linux only")
	}
	const honest = `package catalog
entries: cache: {
	kind: "app"
	namespace: "cache"
	source: {type: "oci", url: "oci://registry.example.com/team/cache", tag: "v1"}
	#Params: {replicas?: int & >=1}
}
`
	// Memory-light: the comprehension keeps nothing.
	const spin = `package catalog
import "list"
entries: {}
_n: len([for i in list.Range(0, 4000, 1) for j in list.Range(0, 4000, 1) if i*j < 0 {i}])
`
	delayed := func(delay string) []string {
		return []string{"/bin/sh", "-c", "sleep " + delay + "; exec \"$0\"", os.Args[0]}
	}
	for _, tt := range []struct {
		name  string
		bound render.CatalogBound
		src   string
		// want: no error, or a CatalogTimeout saying this.
		want string
	}{
		{name: "an honest catalog whose checker waits past its bound passes",
			bound: render.CatalogBound{Command: delayed("5"), Timeout: 4 * time.Second, Memory: 512 << 20}, src: honest},
		{name: "a catalog that computes without end stops on CPU time",
			bound: render.CatalogBound{Command: []string{os.Args[0]}, Timeout: time.Second, Memory: 1 << 30}, src: spin, want: "CPU time"},
		{name: "a checker that makes no progress stops at the wall-clock backstop",
			bound: render.CatalogBound{Command: []string{"/bin/sh", "-c", "exec sleep 60"}, Timeout: 100 * time.Millisecond}, src: honest, want: "wall-clock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.bound.New(context.Background(), []render.Catalog{{Name: "./team", FS: catalogFS(tt.src)}})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("an honest catalog failed: %v", err)
				}
				return
			}
			var ce *render.CatalogError
			if !errors.As(err, &ce) || ce.Reason != render.CatalogTimeout || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want reason %q saying %q", err, render.CatalogTimeout, tt.want)
			}
		})
	}
}

// TestCatalogBoundLoadsAGoodCatalog: a normal catalog passes the check and
// its entries are in the engine; a CUE error is reported as one, naming the
// catalog's file.
func TestCatalogBoundLoadsAGoodCatalog(t *testing.T) {
	b := testBound(t)
	e, err := b.New(context.Background(), []render.Catalog{{Name: "./team", FS: catalogFS(`package catalog
entries: cache: {
	kind: "app"
	namespace: "cache"
	source: {type: "oci", url: "oci://registry.example.com/team/cache", tag: "v1"}
	#Params: {replicas?: int & >=1}
}
`)}})
	if err != nil {
		t.Fatalf("a normal catalog failed the check: %v", err)
	}
	found := false
	for _, c := range e.CatalogEntries() {
		found = found || c == "app/cache"
	}
	if !found {
		t.Errorf("app/cache not among %v", e.CatalogEntries())
	}

	_, err = b.New(context.Background(), []render.Catalog{{Name: "./broken", FS: catalogFS("package catalog\nentries: x: kind: \"app\" & \"config\"\n")}})
	var ce *render.CatalogError
	if !errors.As(err, &ce) || ce.Reason != render.CatalogCUEError {
		t.Fatalf("got %v, want a CatalogError with reason %q", err, render.CatalogCUEError)
	}
	if !strings.Contains(err.Error(), "./broken/entries.cue") {
		t.Errorf("error does not name ./broken/entries.cue: %v", err)
	}
}

// TestCatalogBoundWithoutChecker: a bound with no command or a command
// that is not a checker fails as CatalogCheckerFailed, not as the
// catalog's fault and never by loading the catalog unchecked.
func TestCatalogBoundWithoutChecker(t *testing.T) {
	cats := []render.Catalog{{Name: "./team", FS: catalogFS("package catalog\nentries: {}\n")}}
	for _, b := range []render.CatalogBound{{}, {Command: []string{"/bin/false"}}} {
		_, err := b.New(context.Background(), cats)
		var ce *render.CatalogError
		if !errors.As(err, &ce) || ce.Reason != render.CatalogCheckerFailed {
			t.Errorf("command %v: got %v, want reason %q", b.Command, err, render.CatalogCheckerFailed)
		}
	}
}

// TestCatalogBoundCancelled: a check cut short by the caller's context is
// the caller's error, not the catalog's.
func TestCatalogBoundCancelled(t *testing.T) {
	b := testBound(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.New(ctx, []render.Catalog{{Name: "./team", FS: catalogFS("package catalog\nentries: {}\n")}})
	var ce *render.CatalogError
	if errors.As(err, &ce) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled and no CatalogError", err)
	}
}
