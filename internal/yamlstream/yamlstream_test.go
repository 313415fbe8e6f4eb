package yamlstream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

type doc struct {
	data string
	line int
}

func split(t *testing.T, in string) ([]doc, error) {
	t.Helper()
	docs, err := yamlstream.Split([]byte(in))
	out := make([]doc, 0, len(docs))
	for _, d := range docs {
		out = append(out, doc{string(d.Data), d.Line})
	}
	return out, err
}

func TestSplitCutsDocumentsAsTheAPIServerToolingDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []doc
	}{
		{"one document", "a: 1\nb: 2\n", []doc{{"a: 1\nb: 2\n", 1}}},
		{"no final newline", "a: 1", []doc{{"a: 1\n", 1}}},
		{"plain separator", "a: 1\n---\nb: 2\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		{"separator with a comment", "a: 1\n--- # next one\nb: 2\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		{"separator with trailing blanks", "a: 1\n---  \t\nb: 2\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		// As in the YAMLReader, a first "---" stays with its document.
		{"leading separator", "---\na: 1\n", []doc{{"---\na: 1\n", 1}}},
		{"two leading separators", "---\n---\na: 1\n", []doc{{"---\n", 1}, {"a: 1\n", 3}}},
		{"trailing separator", "a: 1\n---\n", []doc{{"a: 1\n", 1}}},
		{"CRLF", "a: 1\r\n---\r\nb: 2\r\n", []doc{{"a: 1\n", 1}, {"b: 2\n", 3}}},
		{"comment-only document kept", "# c\n---\nb: 2\n", []doc{{"# c\n", 1}, {"b: 2\n", 3}}},
		{"end marker at the end", "a: 1\n...\n", []doc{{"a: 1\n...\n", 1}}},
		{"end marker then a separator", "a: 1\n...\n---\nb: 2\n", []doc{{"a: 1\n...\n", 1}, {"b: 2\n", 4}}},
		{"end marker then comments", "a: 1\n... # end\n# more\n\n", []doc{{"a: 1\n... # end\n# more\n\n", 1}}},
		{"dashes inside a block scalar", "a: |\n  ---\n  x\n", []doc{{"a: |\n  ---\n  x\n", 1}}},
		{"line numbers after blank lines", "\n\na: 1\n---\n\nb: 2\n", []doc{{"\n\na: 1\n", 1}, {"\nb: 2\n", 5}}},
		{"long line", strings.Repeat("x", 10000) + "\n---\nb: 2\n", []doc{{strings.Repeat("x", 10000) + "\n", 1}, {"b: 2\n", 3}}},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := split(t, tc.in)
			if err != nil {
				t.Fatalf("Split: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Split = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("document %d = %+v, want %+v", i+1, got[i], tc.want[i])
				}
			}
		})
	}
}

// What would make a document vanish is an error naming its line, never a
// shorter stream.
func TestSplitRefusesWhatWouldDropADocument(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		line int
		msg  string
		kept int
	}{
		{"inline document after the separator", "a: 1\n--- {kind: X}\n", 2, "invalid Yaml document separator", 0},
		{"block scalar after the separator", "a: 1\n--- |\n  x\n", 2, "invalid Yaml document separator", 0},
		{"dashes glued to content", "a: 1\n---b: 2\n", 2, "invalid Yaml document separator", 0},
		{"content after an end marker", "a: 1\n...\nb: 2\n", 3, `"..." document end marker`, 0},
		{"end marker in the second document", "a: 1\n---\nb: 2\n...\nc: 3\n", 5, `"..." document end marker`, 1},
		{"a bare carriage return before a separator", "a: 1\nb: 2\r---\nc: 3\n", 2, "carriage return not followed by a newline", 0},
		{"a bare carriage return at the end", "a: 1\r\nb: 2\r", 2, "carriage return not followed by a newline", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := split(t, tc.in)
			var se *yamlstream.Error
			if !errors.As(err, &se) || se.Line != tc.line || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Split = %+v, %v; want an error at line %d with %q", got, err, tc.line, tc.msg)
			}
			if len(got) != tc.kept {
				t.Errorf("returned %d documents before the error, want %d", len(got), tc.kept)
			}
		})
	}
}
