package render_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// TestBundleSyncFileIsTheSyncFilesRepositoryPath: the render answers where
// its sync file lives in the repository (the templates join the publish
// path, for the applier object's own path too), for every kind and any
// spelling of the path.
func TestBundleSyncFileIsTheSyncFilesRepositoryPath(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, fixture := range []string{"workload-canary-50", "gateway-tutorial"} {
		data, err := os.ReadFile(filepath.Join(fixturesDir, "valid", fixture+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := render.ObjectsFromYAML(data)
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: want one object, got %d (%v)", fixture, len(objs), err)
		}
		for _, tc := range []struct{ path, prefix string }{
			{".", ""},
			{"./", ""},
			{"clusters/dev", "clusters/dev/"},
			{"./clusters/dev/", "clusters/dev/"},
		} {
			t.Run(fixture+" "+tc.path, func(t *testing.T) {
				pub := render.DefaultPublish()
				pub.Path = tc.path
				b, err := e.Render(context.Background(), render.Input{Object: objs[0], Publish: pub, Resolved: testResolved})
				if err != nil {
					t.Fatal(err)
				}
				if want := tc.prefix + b.Dir + ".sync.yaml"; b.SyncFile != want {
					t.Errorf("SyncFile = %q, want %q", b.SyncFile, want)
				}
			})
		}
	}
}
