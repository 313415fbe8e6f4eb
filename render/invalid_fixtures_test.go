package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// TestInvalidFixturesAreRefusedByTheEngine: every fixtures/invalid case
// fails in the engine itself (not only in the CLI), and the engine's message
// is the one the CLI prints (the case's .err file, which the CLI's test
// checks byte for byte). The decode errors come out of ObjectsFromYAML.
func TestInvalidFixturesAreRefusedByTheEngine(t *testing.T) {
	e, err := render.New()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(fixturesDir, "invalid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid fixtures: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := render.ObjectsFromYAML(data)
			if err == nil {
				if len(objs) != 1 {
					t.Fatalf("want one object, got %d", len(objs))
				}
				_, err = e.Render(context.Background(), render.Input{Object: objs[0], Publish: render.DefaultPublish(), Resolved: testResolved})
			}
			if err == nil {
				t.Fatal("rendered without error")
			}
			want, rerr := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".err")
			if rerr != nil {
				t.Fatalf("read expected error: %v (the engine says: %v)", rerr, err)
			}
			if !strings.Contains(string(want), err.Error()) {
				t.Errorf("the engine's error is not the one in %s.err:\n%s\nwant within:\n%s", name, err, want)
			}
		})
	}
}
