package credurl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/credurl"
)

func TestRedactDropsEveryCredential(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"https password", "https://user:s3cret@git.example.com/org/repo.git", "https://git.example.com/org/repo.git"},
		{"https token as user name", "https://ghp_token@github.com/org/repo", "https://github.com/org/repo"},
		{"http password with a stray percent", "http://user:pa%zzss@host/x", "http://host/x"},
		{"password holding an at sign", "https://u:p@ss@host/x", "https://host/x"},
		{"no path", "https://u:p@host", "https://host"},
		{"query after the host", "https://u:p@host?x=1", "https://host?x=1"},
		{"at sign in the path only", "https://host/a@b", "https://host/a@b"},
		{"ssh password keeps the login", "ssh://git:s3cret@host/org/repo", "ssh://git@host/org/repo"},
		{"ssh login only", "ssh://git@host:2222/org/repo", "ssh://git@host:2222/org/repo"},
		{"ssh password without login", "ssh://:s3cret@host/r", "ssh://host/r"},
		{"scp form login", "git@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"scp form password", "git:s3cret@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"oci password", "oci://robot:s3cret@registry.example.com/fleet:latest", "oci://registry.example.com/fleet:latest"},
		{"upper-case scheme", "HTTPS://u:s3cret@host/x", "HTTPS://host/x"},
		{"local path with at sign", "/srv/git/a@b:c/repo", "/srv/git/a@b:c/repo"},
		{"no user info", "https://host/org/repo", "https://host/org/repo"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := credurl.Redact(tc.in)
			if got != tc.want {
				t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, "s3cret") || strings.Contains(got, "ghp_token") || strings.Contains(got, "zz") {
				t.Errorf("Redact(%q) = %q still holds the credential", tc.in, got)
			}
		})
	}
}

func TestCheckRefusesCredentialsButNotAnSSHLogin(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		refused  bool
	}{
		{"https password", "https://user:s3cret@host/r", true},
		{"https user name only (a token)", "https://ghp_token@host/r", true},
		{"https empty user info", "https://@host/r", true},
		{"unparsable password", "http://user:pa%zz@host/r", true},
		{"ssh password", "ssh://git:s3cret@host/r", true},
		{"scp password", "git:s3cret@host:org/r", true},
		{"oci password", "oci://u:s3cret@registry/r", true},
		{"file user info", "file://u:s3cret@/srv/r", true},
		{"ssh login", "ssh://git@host/r", false},
		{"scp login", "git@host:org/r", false},
		{"https plain", "https://host/r", false},
		{"local path", "/srv/git/repo", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := credurl.Check(tc.in)
			if (err != nil) != tc.refused {
				t.Fatalf("Check(%q) = %v, want refused %v", tc.in, err, tc.refused)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, credurl.ErrCredentials) {
				t.Errorf("Check(%q) = %v, not ErrCredentials", tc.in, err)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "ghp_token") || strings.Contains(err.Error(), "zz") {
				t.Errorf("Check(%q) = %q echoes the credential", tc.in, err)
			}
		})
	}
}
