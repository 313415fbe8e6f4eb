package publish_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// The index as Scribe wrote it by string concatenation before it used a
// YAML encoder: the encoder must produce the same bytes, so no repository
// sees a change (nor a refusal) from the switch.
func TestSyncIndexDataKeepsTheBytesOfEarlierIndexes(t *testing.T) {
	const head = "# Written by Scribe: every object's sync file below this path.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"no objects", nil, head + "resources: []\n"},
		{"one object", []string{"shop/workload/web.sync.yaml"}, head + "resources:\n- shop/workload/web.sync.yaml\n"},
		{"two objects", []string{"a/workload/x.sync.yaml", "b/experiment/y-1.sync.yaml"}, head + "resources:\n- a/workload/x.sync.yaml\n- b/experiment/y-1.sync.yaml\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := publish.SyncIndexData(tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("SyncIndexData = %q\nwant %q", got, tc.want)
			}
			if err := publish.CheckSyncIndex(got); err != nil {
				t.Fatalf("Scribe's own index is refused: %v", err)
			}
		})
	}
}

func TestCheckSyncIndexAcceptsOnlyScribesOwnIndex(t *testing.T) {
	own, err := publish.SyncIndexData([]string{"shop/workload/web.sync.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data string
		want string // "" when Scribe's; else a substring of the reason
	}{
		{"Scribe's index", string(own), ""},
		{"Scribe's index with CRLF line ends", strings.ReplaceAll(string(own), "\n", "\r\n"), ""},
		{"Scribe's index after a byte-order mark", "\ufeff" + string(own), ""},
		{"a hand-written kustomization", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- apps.yaml\n", "first line is not Scribe's marker"},
		{"the marker below another line", "# mine\n" + string(own), "first line is not Scribe's marker"},
		{"Scribe's index with a hand-added entry", string(own) + "- ../secrets.yaml\n", "resources[1]"},
		{"Scribe's index with a hand-added plain file", string(own) + "- apps.yaml\n", "resources[1]"},
		{"Scribe's index with a hand-added field", string(own) + "namespace: prod\n", "not a kustomization Scribe writes"},
		{"the marker on another kind", SyncMarker() + "apiVersion: v1\nkind: ConfigMap\n", "not Scribe's"},
		{"the marker on garbage", SyncMarker() + "resources: [unclosed\n", "not a kustomization Scribe writes"},
		{"an empty file", "", "first line is not Scribe's marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := publish.CheckSyncIndex([]byte(tc.data))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckSyncIndex = %v, want Scribe's", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckSyncIndex = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func SyncMarker() string { return publish.SyncIndexMarker + "\n" }

func TestGitSyncIndexNeverOverwritesAKustomizationScribeDidNotWrite(t *testing.T) {
	const human = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- platform/ingress.yaml\n- platform/monitoring.yaml\n"
	for _, tc := range []struct {
		name, file string
		dir        bool
	}{
		{"a hand-written kustomization.yaml", human, false},
		{"Scribe's index with a hand-added entry", SyncMarker() + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- platform/ingress.yaml\n", false},
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

			g := publish.NewGit(t.TempDir())
			sink := newSink(t, g, publish.GitOptions{URL: url, Branch: "main", Path: "clusters/dev", SyncIndex: true})
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
