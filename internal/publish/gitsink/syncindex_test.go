package gitsink_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

func TestGitSyncIndexNeverOverwritesAKustomizationScribeDidNotWrite(t *testing.T) {
	const human = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- platform/ingress.yaml\n- platform/monitoring.yaml\n"
	for _, tc := range []struct {
		name, file string
		dir        bool
	}{
		{"a hand-written kustomization.yaml", human, false},
		{"Scribe's index with a hand-added entry", publish.SyncIndexMarker + "\n" + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- platform/ingress.yaml\n", false},
		{"a directory named kustomization.yaml", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := publishtest.NewGitServer(t)
			url := srv.InitRepo(t, "idx", "main")
			work := clone(t, url, "main")
			p := filepath.Join(work, "clusters/dev/kustomization.yaml")
			if tc.dir {
				p = filepath.Join(p, "x.yaml")
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			content := tc.file
			if tc.dir {
				content = "x: 1\n"
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			publishtest.Git(t, work, "add", ".")
			publishtest.Git(t, work, "commit", "--quiet", "-m", "the platform team's kustomization")
			publishtest.Git(t, work, "push", "--quiet", "origin", "main")
			before := publishtest.Git(t, work, "rev-parse", "HEAD")

			g := gitsink.New(t.TempDir())
			sink := newSink(t, g, gitsink.Options{URL: url, Branch: "main", Path: "clusters/dev", SyncIndex: true})
			_, err := sink.Publish(ctx, publish.ChangeFor(testBundle("team-a", "web", "x")))
			var pe *publish.Error
			if !errors.As(err, &pe) || pe.Reason != publish.ReasonSyncIndexConflict {
				t.Fatalf("publish = %v (reason %s), want %s", err, publish.ReasonOf(err), publish.ReasonSyncIndexConflict)
			}
			for _, want := range []string{"clusters/dev/kustomization.yaml", "Scribe did not write it", "does not overwrite", "remove clusters/dev/kustomization.yaml"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			got := clone(t, url, "main")
			if head := publishtest.Git(t, got, "rev-parse", "HEAD"); head != before {
				t.Fatalf("the branch moved to %s: the refused change was committed", head)
			}
			if !tc.dir {
				if data := readFile(t, filepath.Join(got, "clusters/dev/kustomization.yaml")); data != tc.file {
					t.Fatalf("the kustomization was changed: %q", data)
				}
			}
		})
	}
}
