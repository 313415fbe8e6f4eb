package yamlstream_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// FuzzSplit feeds raw bytes to Split. It never panics; the documents'
// lines are in the stream and ascending; and no document Split returns
// holds a second one that a YAML parser would read and a caller asking
// for one document would silently drop. Seeds: testdata/fuzz/FuzzSplit.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("a: 1\n--- # c\nb: 2\n...\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := yamlstream.Split(data)
		if err != nil {
			var se *yamlstream.Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *yamlstream.Error", err)
			}
			if se.Line < 1 || se.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error at line %d, outside the stream's %d lines", se.Line, bytes.Count(data, []byte("\n"))+1)
			}
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		prev := 0
		for i, d := range docs {
			if d.Line <= prev || d.Line > lines {
				t.Fatalf("document %d at line %d (previous %d, %d lines)", i+1, d.Line, prev, lines)
			}
			prev = d.Line
			dec := yaml.NewDecoder(bytes.NewReader(d.Data))
			n := 0
			for n < 3 {
				var node yaml.Node
				if err := dec.Decode(&node); err != nil {
					if !errors.Is(err, io.EOF) {
						n = 0 // does not parse: the caller reports it
					}
					break
				}
				n++
			}
			if n > 1 {
				t.Fatalf("document %d (line %d) holds %d YAML documents:\n%q", i+1, d.Line, n, d.Data)
			}
		}
	})
}
