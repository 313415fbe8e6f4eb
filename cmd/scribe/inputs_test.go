package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpandFilesSkipsHiddenFilesAndFoldersBelowADirectory(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b/c.yml", "d.json", "notes.txt", ".golangci.yml", ".github/workflows/ci.yaml", "b/.draft.yaml", ".config/x.yaml"} {
		writeFile(t, filepath.Join(dir, f), "{}\n")
	}
	tests := []struct {
		name    string
		args    []string
		want    []string // relative to dir; "-" as it is
		wantErr string
	}{
		{name: "a directory: manifests only, hidden entries skipped", args: []string{dir}, want: []string{"a.yaml", "b/c.yml", "d.json"}},
		{name: "a hidden file named on the command line is read", args: []string{filepath.Join(dir, ".golangci.yml")}, want: []string{".golangci.yml"}},
		{name: "a hidden directory named on the command line is read", args: []string{filepath.Join(dir, ".config")}, want: []string{".config/x.yaml"}},
		{name: "stdin with a directory", args: []string{"-", filepath.Join(dir, "b")}, want: []string{"-", "b/c.yml"}},
		{name: "stdin is read once", args: []string{"-", "-"}, wantErr: "standard input can be read only once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expandFiles(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rel := make([]string, len(got))
			for i, p := range got {
				rel[i] = p
				if p != stdinArg {
					r, err := filepath.Rel(dir, p)
					if err != nil {
						t.Fatal(err)
					}
					rel[i] = filepath.ToSlash(r)
				}
			}
			if strings.Join(rel, " ") != strings.Join(tt.want, " ") {
				t.Errorf("files %q, want %q", rel, tt.want)
			}
		})
	}
}

func TestReadInputsReadsStdinAsAYAMLStream(t *testing.T) {
	stream := "apiVersion: scribe.dev/v1alpha1\nkind: Repository\nmetadata: {name: a}\n---\napiVersion: scribe.dev/v1alpha1\nkind: Repository\nmetadata: {name: b}\n"
	docs, files, err := readInputs(context.Background(), []string{"-"}, strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].file != stdinName || docs[1].err != nil || strings.Join(files, ",") != stdinName {
		t.Fatalf("docs %+v, files %q: want two documents of %s", docs, files, stdinName)
	}
	if _, _, err := readInputs(context.Background(), []string{"-"}, strings.NewReader(strings.Repeat("#", maxInputSize+1))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("stdin over the limit: error %v", err)
	}
}
