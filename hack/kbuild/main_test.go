package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
)

func TestParseImage(t *testing.T) {
	for in, want := range map[string]types.Image{
		"scribe=scribe:latest":                      {Name: "scribe", NewName: "scribe", NewTag: "latest"},
		"scribe=localhost:5000/scribe":              {Name: "scribe", NewName: "localhost:5000/scribe"},
		"scribe=localhost:5000/x/scribe:v1.2.3":     {Name: "scribe", NewName: "localhost:5000/x/scribe", NewTag: "v1.2.3"},
		"scribe=ghcr.io/s/scribe@sha256:abc":        {Name: "scribe", NewName: "ghcr.io/s/scribe", Digest: "sha256:abc"},
		"scribe=ghcr.io/s/scribe:v1@sha256:abc":     {Name: "scribe", NewName: "ghcr.io/s/scribe", NewTag: "v1", Digest: "sha256:abc"},
		"scribe=registry.example:443/scribe:latest": {Name: "scribe", NewName: "registry.example:443/scribe", NewTag: "latest"},
	} {
		got, err := ParseImage(in)
		if err != nil || got != want {
			t.Errorf("ParseImage(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "scribe", "=x", "scribe=", "scribe=x:", "scribe=x@", "scribe=:v1"} {
		if _, err := ParseImage(bad); err == nil {
			t.Errorf("ParseImage(%q) succeeded", bad)
		}
	}
}

// TestBuildSetsImage builds config/default as `make deploy IMG=…` does.
func TestBuildSetsImage(t *testing.T) {
	out, err := Build("../../config/default", "scribe=localhost:5000/scribe:v9")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "image: localhost:5000/scribe:v9\n") {
		t.Error("the Deployment's image was not set")
	}
	if strings.Contains(string(out), "image: scribe:latest") {
		t.Error("the default image is still there")
	}
	plain, err := Build("../../config/default", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(plain), "image: scribe:latest\n") {
		t.Error("without -image the image is not scribe:latest")
	}
}
