package main

import (
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		app     string
		push    string
		layout  string
		tag     string
		plats   []string
		created time.Time
		wantErr string
	}{
		{name: "defaults: scribe into bin/image", app: "scribe", layout: filepath.Join(".", "bin", "image", "scribe"), tag: "scribe:latest", plats: []string{"linux/amd64"}},
		{name: "a loopback registry is pushed to", args: []string{"-img", "127.0.0.1:5000/scribe:dev"}, app: "scribe", push: "127.0.0.1:5000/scribe:dev", plats: []string{"linux/amd64"}},
		{name: "a named registry is pushed to", args: []string{"-img", "ghcr.io/example/scribe:v1"}, app: "scribe", push: "ghcr.io/example/scribe:v1", plats: []string{"linux/amd64"}},
		{name: "a bare name is a layout's ref name", args: []string{"-img", "team/scribe:v1", "-layout", "out"}, app: "scribe", layout: "out", tag: "team/scribe:v1", plats: []string{"linux/amd64"}},
		{name: "the demo app", args: []string{"-app", "demo-app", "-module-root", "repo"}, app: "demo-app", layout: filepath.Join("repo", "bin", "image", "demo-app"), tag: "demo-app:latest", plats: []string{"linux/amd64"}},
		{name: "two platforms", args: []string{"-platforms", "linux/amd64, linux/arm64"}, app: "scribe", layout: filepath.Join(".", "bin", "image", "scribe"), tag: "scribe:latest", plats: []string{"linux/amd64", "linux/arm64"}},
		{name: "an RFC 3339 creation time", args: []string{"-created", "2026-01-02T03:04:05Z"}, app: "scribe", layout: filepath.Join(".", "bin", "image", "scribe"), tag: "scribe:latest", plats: []string{"linux/amd64"}, created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{name: "SOURCE_DATE_EPOCH wins", args: []string{"-created", "2026-01-02T03:04:05Z"}, env: map[string]string{"SOURCE_DATE_EPOCH": "86400"}, app: "scribe", layout: filepath.Join(".", "bin", "image", "scribe"), tag: "scribe:latest", plats: []string{"linux/amd64"}, created: time.Unix(86400, 0)},
		{name: "an unknown app", args: []string{"-app", "nginx"}, wantErr: `no image named "nginx"`},
		{name: "a layout for a pushed image", args: []string{"-img", "localhost:5000/x", "-layout", "out"}, wantErr: "names a registry"},
		{name: "a bad creation time", args: []string{"-created", "yesterday"}, wantErr: "creation time"},
		{name: "stray arguments", args: []string{"scribe"}, wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			opts, err := parseFlags(tt.args, getenv, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []any{opts.App.Name, opts.Push, opts.Layout, opts.Tag, opts.Platforms, opts.Created.Equal(tt.created)}
			want := []any{tt.app, tt.push, tt.layout, tt.tag, tt.plats, true}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("app, push, layout, tag, platforms, created ok = %v, want %v (created %v)", got, want, opts.Created)
			}
		})
	}
}
