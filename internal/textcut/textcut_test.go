package textcut_test

import (
	"testing"
	"unicode/utf8"

	"github.com/scribe-gitops/scribe/internal/textcut"
)

// TestCutsNeverSplitACharacter: a cut keeps at most n bytes, ends on a
// character boundary, and says it cut (Ellipsis) only when it did.
func TestCutsNeverSplitACharacter(t *testing.T) {
	for _, tc := range []struct {
		s        string
		n        int
		prefix   string
		ellipsis string
	}{
		{s: "abc", n: 3, prefix: "abc", ellipsis: "abc"},
		{s: "abc", n: 5, prefix: "abc", ellipsis: "abc"},
		{s: "abcd", n: 2, prefix: "ab", ellipsis: "ab…"},
		{s: "aé", n: 2, prefix: "a", ellipsis: "a…"},    // é is 2 bytes: not split
		{s: "a€b", n: 3, prefix: "a", ellipsis: "a…"},   // € is 3 bytes
		{s: "a€b", n: 4, prefix: "a€", ellipsis: "a€…"}, // ends right after it
		{s: "€", n: 2, prefix: "", ellipsis: "…"},
		{s: "abc", n: 0, prefix: "", ellipsis: "…"},
		{s: "", n: 0, prefix: "", ellipsis: ""},
		{s: "abc", n: -1, prefix: "", ellipsis: "…"},
	} {
		if got := textcut.Prefix(tc.s, tc.n); got != tc.prefix || !utf8.ValidString(got) {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.prefix)
		}
		if got := textcut.Ellipsis(tc.s, tc.n); got != tc.ellipsis {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.ellipsis)
		}
	}
}
