package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/crds"
)

func TestRunPrintsOneFilePerLineOrNothing(t *testing.T) {
	mirror := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mirror, "talos"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"controlplane.cluster.x-k8s.io_taloscontrolplanes.yaml", "bootstrap.cluster.x-k8s.io_talosconfigtemplates.yaml"} {
		if err := os.WriteFile(filepath.Join(mirror, "talos", f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := crds.Resolver{Mirror: mirror} // no module downloads
	tests := []struct {
		name     string
		projects []string
		want     string
		wantErr  string
	}{
		{
			name:     "the named projects' files, in order",
			projects: []string{"talos-bootstrap", "talos-controlplane"},
			want: filepath.Join(mirror, "talos", "bootstrap.cluster.x-k8s.io_talosconfigtemplates.yaml") + "\n" +
				filepath.Join(mirror, "talos", "controlplane.cluster.x-k8s.io_taloscontrolplanes.yaml") + "\n",
		},
		{
			name:     "nothing when one project cannot be found, and an error naming SCRIBE_CRDS_DIR",
			projects: []string{"talos-bootstrap", "testkube"},
			wantErr:  crds.EnvDir,
		},
		{
			name:    "no project means every project",
			wantErr: "flux-source",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), &out, r, tc.projects)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if out.Len() > 0 {
					t.Errorf("wrote %q despite the error", out.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}
