package credurl

import "testing"

func TestWithinBindsACredentialToItsURLPrefixOnly(t *testing.T) {
	cases := []struct {
		name, prefix, url string
		want              bool
	}{
		{"the prefix itself", "https://git.example.com/team-a", "https://git.example.com/team-a", true},
		{"a repository below it", "https://git.example.com/team-a", "https://git.example.com/team-a/app.git", true},
		{"a trailing slash on the prefix", "https://git.example.com/team-a/", "https://git.example.com/team-a/app.git", true},
		{"the host only", "https://git.example.com", "https://git.example.com/any/repo", true},
		{"host case is not a boundary", "https://GIT.example.com/team-a", "https://git.example.com/team-a/x", true},
		{"a sibling that shares the prefix's letters", "https://git.example.com/team-a", "https://git.example.com/team-a-evil/app.git", false},
		{"another host", "https://git.example.com/team-a", "https://evil.example.com/team-a/app.git", false},
		{"a host that ends like it", "https://example.com", "https://git.example.com.evil.io/x", false},
		{"another port", "https://git.example.com/team-a", "https://git.example.com:8443/team-a/app.git", false},
		{"another scheme", "https://git.example.com/team-a", "http://git.example.com/team-a/app.git", false},
		{"a dot-dot climb", "https://git.example.com/team-a", "https://git.example.com/team-a/../team-b/app.git", false},
		{"an encoded dot-dot", "https://git.example.com/team-a", "https://git.example.com/team-a/%2e%2e/team-b", false},
		{"an encoded slash", "https://git.example.com/team-a", "https://git.example.com/team-a%2f..%2fteam-b", false},
		{"a query", "https://git.example.com/team-a", "https://git.example.com/team-a/app?x=1", false},
		{"a dot segment", "https://git.example.com/team-a", "https://git.example.com/team-a/./app", false},
		{"a dot-dot at the end", "https://git.example.com/team-a", "https://git.example.com/team-a/..", false},
		{"an upper-case encoded dot-dot", "https://git.example.com/team-a", "https://git.example.com/team-a/%2E%2E/admin", false},
		{"a half-encoded dot-dot", "https://git.example.com/team-a", "https://git.example.com/team-a/.%2e/admin", false},
		{"an encoded dot segment", "https://git.example.com/team-a", "https://git.example.com/team-a/%2e/app", false},
		{"a double-encoded dot-dot", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/%252e%252e/admin", false},
		{"a double-encoded slash", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks%252f..%252fadmin", false},
		{"an encoded percent", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/%25", false},
		{"a dot-dot with matrix parameters (Tomcat)", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..;/admin", false},
		{"a dot-dot with a named matrix parameter", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..;x=1/admin", false},
		{"matrix parameters", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks;jsessionid=1/deploy", false},
		{"an encoded semicolon", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..%3b/admin", false},
		{"an encoded backslash", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..%5cadmin", false},
		{"an upper-case encoded backslash", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..%5Cadmin", false},
		{"a double-encoded backslash", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..%255cadmin", false},
		{"a backslash", "https://hooks.example.com/hooks", `https://hooks.example.com/hooks/..\admin`, false},
		{"an encoded control character", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/..%00/admin", false},
		{"an ordinary encoded space is fine", "https://hooks.example.com/hooks", "https://hooks.example.com/hooks/my%20hook", true},
		{"user info is not a boundary", "https://git.example.com/team-a", "https://bot@git.example.com/team-a/app", true},
		{"an ssh login", "ssh://git@github.com/org", "ssh://git@github.com/org/repo.git", true},
		{"the scp form", "ssh://git@github.com/org", "git@github.com:org/repo.git", true},
		{"the scp form of another org", "ssh://git@github.com/org", "git@github.com:org2/repo.git", false},
		{"not a URL", "https://git.example.com/team-a", "team-a/app", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Within(c.prefix, c.url)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Within(%q, %q) = %v, want %v", c.prefix, c.url, got, c.want)
			}
		})
	}
}

func TestWithinRefusesAPrefixThatIsNotAURL(t *testing.T) {
	for _, prefix := range []string{"", "team-a", "https://host/a?b=c", "https://host/a/../b", "https://host/a;x=1", "https://host/a/%252e%252e"} {
		if _, err := Within(prefix, "https://host/a"); err == nil {
			t.Errorf("Within(%q, ...): want an error", prefix)
		}
	}
}
