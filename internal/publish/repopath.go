package publish

import (
	"fmt"
	"path"
	"strings"
)

// CleanRepoPath is Scribe's one rule for the path in a repository (or an
// artifact) that it writes under and reads back: --path of every command
// and a Repository's spec.git.path. It returns the path cleaned ("." for
// the root) or an error saying why it is refused:
//   - it must stay inside the repository (no absolute path, no ".." out);
//   - no component may be ".git" in any case (nor ".git" with the trailing
//     dots or spaces Windows drops): Git refuses such a tree, so a commit
//     holding one breaks every clone of the branch;
//   - no backslash (a separator on Windows, a different path on Linux)
//     and no NUL or other control character.
//
// The CRD's validation of spec.git.path says the same in CEL.
func CleanRepoPath(p string) (string, error) {
	for _, r := range p {
		switch {
		case r == '\\':
			return "", fmt.Errorf("%q holds a backslash: use / between directories", p)
		case r < 0x20 || r == 0x7f:
			return "", fmt.Errorf("%q holds a control character", p)
		}
	}
	c := path.Clean(p)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q must be a relative path inside the repository", p)
	}
	for _, part := range strings.Split(c, "/") {
		if strings.EqualFold(strings.TrimRight(part, ". "), ".git") {
			return "", fmt.Errorf("%q has a %q component: Git refuses it in a tree, and every clone of the branch would fail", p, part)
		}
	}
	return c, nil
}

// CheckRepoPath applies CleanRepoPath to a sink's path, which must be
// given clean already ("" is the root): the Git and Dir sinks' check of
// their options.
func CheckRepoPath(p string) error {
	if p == "" {
		return nil
	}
	c, err := CleanRepoPath(p)
	if err != nil {
		return fmt.Errorf("git sink: path %w", err)
	}
	if c != p {
		return fmt.Errorf("git sink: path %q must be clean (%q)", p, c)
	}
	return nil
}
