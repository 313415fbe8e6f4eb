package publish_test

import (
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
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
