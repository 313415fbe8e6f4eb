package gitsink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fetch cache's git config names the remote without credentials, even
// when it is made for a URL that carried some: nothing secret is on disk.
func TestGitCacheConfigHoldsNoCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if _, err := resetGitStore(dir, "https://user:s3cret@git.example.com/org/r.git"); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), "s3cret") || strings.Contains(string(cfg), "user@") {
		t.Errorf("cache config holds the credential:\n%s", cfg)
	}
	if !strings.Contains(string(cfg), "https://git.example.com/org/r.git") {
		t.Errorf("cache config lacks the redacted URL:\n%s", cfg)
	}
}

// Every entry point that takes a Git URL refuses one carrying credentials
// (they come from the Secret only) and never repeats them.
func TestGitEntryPointsRefuseCredentialsInTheURL(t *testing.T) {
	urls := []string{
		"https://user:s3cret@git.example.com/org/r.git",
		"https://s3cret@git.example.com/org/r.git",
		"http://user:s3cret%zz@git.example.com/org/r.git",
		"ssh://git:s3cret@git.example.com/org/r.git",
		"git:s3cret@git.example.com:org/r.git",
	}
	for _, u := range urls {
		g := New(t.TempDir())
		_, errSink := g.Sink(Options{URL: u, Branch: "main"})
		_, errAuth := AuthFromSecret(u, nil)
		_, errAccess := g.CheckAccess(context.Background(), Options{URL: u, Branch: "main"})
		_, errStore := g.store(u)
		for name, err := range map[string]error{"Sink": errSink, "AuthFromSecret": errAuth, "CheckAccess": errAccess, "store": errStore} {
			if err == nil {
				t.Errorf("%s(%s) accepted the URL", name, u)
				continue
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "zz") {
				t.Errorf("%s error repeats the credential: %v", name, err)
			}
			if !strings.Contains(err.Error(), "carries credentials") {
				t.Errorf("%s error does not say why: %v", name, err)
			}
		}
	}
}
