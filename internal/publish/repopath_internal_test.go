package publish

import (
	"strings"
	"testing"
)

func TestCleanRepoPathIsOneRuleForEveryPath(t *testing.T) {
	for _, tc := range []struct {
		in, want, refused string
	}{
		{".", ".", ""},
		{"", ".", ""},
		{"clusters/dev/", "clusters/dev", ""},
		{"./a//b", "a/b", ""},
		{".github/workflows", ".github/workflows", ""},
		{"x.git/.gitkeep/.gitignore", "x.git/.gitkeep/.gitignore", ""},
		{".git", "", ".git"},
		{".git/hooks", "", ".git"},
		{"x/.GIT", "", ".GIT"},
		{"x/.Git/y", "", ".Git"},
		{"a/.git./b", "", ".git."},
		{"a/.git /b", "", ".git "},
		{"a/b/../.git", "", ".git"},
		{`clusters\dev`, "", "backslash"},
		{`..\x`, "", "backslash"},
		{"../x", "", "inside the repository"},
		{"a/../../x", "", "inside the repository"},
		{"/abs", "", "inside the repository"},
		{"..", "", "inside the repository"},
		{"a\x00b", "", "control character"},
		{"a\nb", "", "control character"},
	} {
		got, err := CleanRepoPath(tc.in)
		if tc.refused == "" {
			if err != nil || got != tc.want {
				t.Errorf("CleanRepoPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("CleanRepoPath(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.refused)
		}
	}
}
