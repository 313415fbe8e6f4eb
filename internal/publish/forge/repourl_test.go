package forge

import (
	"strings"
	"testing"
)

func TestResolveDerivesRepositoryAndAPIURLFromTheCloneURL(t *testing.T) {
	cases := []struct {
		name, provider, repoURL, apiURL string
		wantRepo, wantOwner, wantName   string
		wantAPI                         string
	}{
		{"github https with .git", "github", "https://github.com/acme/exp.git", "", "acme/exp", "acme", "exp", "https://api.github.com/"},
		{"github https without .git", "github", "https://github.com/acme/exp", "", "acme/exp", "acme", "exp", "https://api.github.com/"},
		{"github https trailing slash", "github", "https://github.com/acme/exp/", "", "acme/exp", "acme", "exp", "https://api.github.com/"},
		{"github scp form", "github", "git@github.com:acme/exp.git", "", "acme/exp", "acme", "exp", "https://api.github.com/"},
		{"github ssh URL", "github", "ssh://git@github.com/acme/exp.git", "", "acme/exp", "acme", "exp", "https://api.github.com/"},
		{"github enterprise https", "github", "https://ghe.example.com/acme/exp.git", "", "acme/exp", "acme", "exp", "https://ghe.example.com/api/v3/"},
		{"github enterprise ssh with port", "github", "ssh://git@ghe.example.com:2222/acme/exp.git", "", "acme/exp", "acme", "exp", "https://ghe.example.com/api/v3/"},
		{"github enterprise scp form", "github", "git@ghe.example.com:acme/exp.git", "", "acme/exp", "acme", "exp", "https://ghe.example.com/api/v3/"},
		{"github explicit API URL", "github", "https://ghe.example.com/acme/exp", "https://ghe-api.example.com/api/v3", "acme/exp", "acme", "exp", "https://ghe-api.example.com/api/v3/"},
		{"gitlab.com", "gitlab", "https://gitlab.com/acme/exp.git", "", "acme/exp", "acme", "exp", "https://gitlab.com/api/v4"},
		{"gitlab subgroups https", "gitlab", "https://gitlab.example.com/acme/platform/team/exp.git", "", "acme/platform/team/exp", "acme/platform/team", "exp", "https://gitlab.example.com/api/v4"},
		{"gitlab subgroups scp form", "gitlab", "git@gitlab.example.com:acme/platform/exp.git", "", "acme/platform/exp", "acme/platform", "exp", "https://gitlab.example.com/api/v4"},
		{"gitlab subgroups ssh URL", "gitlab", "ssh://git@gitlab.example.com:2222/acme/platform/exp.git", "", "acme/platform/exp", "acme/platform", "exp", "https://gitlab.example.com/api/v4"},
		{"gitlab http with port", "gitlab", "http://127.0.0.1:8080/acme/exp.git", "", "acme/exp", "acme", "exp", "http://127.0.0.1:8080/api/v4"},
		{"gitlab explicit API URL", "gitlab", "https://example.com/gitlab/acme/exp.git", "https://example.com/gitlab/api/v4/", "gitlab/acme/exp", "gitlab/acme", "exp", "https://example.com/gitlab/api/v4"},
		{"gitea https", "gitea", "https://gitea.example.com/acme/exp.git", "", "acme/exp", "acme", "exp", "https://gitea.example.com"},
		{"gitea scp form", "gitea", "gitea@gitea.example.com:acme/exp.git", "", "acme/exp", "acme", "exp", "https://gitea.example.com"},
		{"gitea explicit API URL with /api/v1", "gitea", "https://gitea.example.com/acme/exp", "https://gitea.example.com:3000/api/v1/", "acme/exp", "acme", "exp", "https://gitea.example.com:3000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := resolve(tc.provider, tc.repoURL, tc.apiURL)
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			if ep.repo != tc.wantRepo || ep.owner != tc.wantOwner || ep.name != tc.wantName || ep.apiURL != tc.wantAPI {
				t.Fatalf("resolve = repo %q owner %q name %q API %q; want %q %q %q %q",
					ep.repo, ep.owner, ep.name, ep.apiURL, tc.wantRepo, tc.wantOwner, tc.wantName, tc.wantAPI)
			}
		})
	}
}

func TestResolveRejectsInvalidURLs(t *testing.T) {
	cases := []struct {
		name, provider, repoURL, apiURL, want string
	}{
		{"empty", "github", "", "", "repository URL is empty"},
		{"no scheme nor ssh form", "github", "github.com/acme/exp", "", "neither a URL"},
		{"local path", "gitea", "/srv/git/acme/exp.git", "", "neither a URL"},
		{"unsupported scheme", "github", "ftp://github.com/acme/exp", "", `unsupported scheme "ftp"`},
		{"file URL", "gitlab", "file:///srv/acme/exp.git", "", "has no host"},
		{"no path", "github", "https://github.com", "", "no repository path"},
		{"only owner", "github", "https://github.com/acme", "", "want owner/repo"},
		{"too deep for github", "github", "https://github.com/acme/exp/tree/main", "", "want owner/repo"},
		{"too deep for gitea", "gitea", "git@gitea.example.com:acme/sub/exp.git", "", "want owner/repo"},
		{"gitlab single segment", "gitlab", "https://gitlab.com/exp.git", "", "want group/project"},
		{"gitlab web page URL", "gitlab", "https://gitlab.com/acme/exp/-/tree/main", "", "not a repository path"},
		{"empty segment", "github", "https://github.com/acme//exp", "", "not a repository path"},
		{"query", "github", "https://github.com/acme/exp?tab=readme", "", "no query or fragment"},
		{"bad host", "github", "https://gith ub.com/acme/exp", "", "invalid repository URL"},
		{"scp form without host", "github", "git@:acme/exp.git", "", "no valid host"},
		{"relative API URL", "github", "https://github.com/acme/exp", "/api/v3", "want an absolute http(s) URL"},
		{"clone URL with credentials", "github", "https://x-access-token:secret@github.com/acme/exp.git", "", "carries credentials"},
		{"clone URL with a token as user name", "github", "https://secret@github.com/acme/exp.git", "", "carries credentials"},
		{"API URL with credentials", "gitea", "https://gitea.example.com/acme/exp", "https://u:secret@gitea.example.com", "credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resolve(tc.provider, tc.repoURL, tc.apiURL)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("resolve error = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks the credentials", err)
			}
		})
	}
}

func TestErrorsNeverLeakCredentialsOfTheRepoURL(t *testing.T) {
	_, err := New(Options{Provider: "github", RepoURL: "https://user:secret@github.com/acme?x=1", Token: "t"})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("New error = %v, want an error without the password", err)
	}
}
