package credurl

import "testing"

// TestSameRemoteComparesSchemeHostPortAndPath: an applier source is a
// Repository's own only when it reaches the same server (scheme, host,
// port) and the same repository path, normalised: host case, a default
// port, a trailing ".git" or slash and a login do not matter; a different
// host with the same path is another repository.
func TestSameRemoteComparesSchemeHostPortAndPath(t *testing.T) {
	cases := []struct {
		name string
		a, b string
		want bool
	}{
		{"the same URL", "https://github.com/org/repo", "https://github.com/org/repo", true},
		{"a trailing .git", "https://github.com/org/repo", "https://github.com/org/repo.git", true},
		{"a trailing slash", "http://127.0.0.1:3000/team/repo.git", "http://127.0.0.1:3000/team/repo.git/", true},
		{"host case", "https://GitHub.com/org/repo", "https://github.com/org/repo", true},
		{"the default port written out", "https://github.com:443/org/repo", "https://github.com/org/repo", true},
		{"an ssh login and its default port", "ssh://git@github.com:22/org/repo.git", "ssh://github.com/org/repo", true},
		{"the scp form of the same ssh remote", "git@github.com:org/repo.git", "ssh://git@github.com/org/repo", true},
		{"a different host with the same path", "https://git.example.com/platform/root.git", "https://evil.example.com/platform/root.git", false},
		{"an in-cluster name with the same path", "http://127.0.0.1:1/acme/experiments.git", "ssh://git@git.internal/acme/experiments.git", false},
		{"another port", "https://git.example.com/org/repo", "https://git.example.com:8443/org/repo", false},
		{"another scheme", "http://git.example.com/org/repo", "https://git.example.com/org/repo", false},
		{"ssh and https of one host", "git@github.com:org/repo.git", "https://github.com/org/repo", false},
		{"path case", "https://git.example.com/Org/Repo", "https://git.example.com/org/repo", false},
		{"another repository", "https://github.com/org/repo", "https://github.com/org/other", false},
		{"a sub-path", "https://github.com/org/repo", "https://github.com/org/repo/sub", false},
		{"a climb", "https://github.com/org/repo", "https://github.com/org/x/../repo", false},
		{"no path", "https://github.com", "https://github.com", false},
		{"oci with the default port", "oci://registry.example.com/fleet", "oci://registry.example.com:443/fleet", true},
		{"not a URL", "oops", "oops", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SameRemote(c.a, c.b); got != c.want {
				t.Errorf("SameRemote(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
			}
			if got := SameRemote(c.b, c.a); got != c.want {
				t.Errorf("SameRemote(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
			}
		})
	}
}
