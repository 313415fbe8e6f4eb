// Package yamlstream is Scribe's one reader of YAML streams: custom
// resources given to the CLI, the files a pull-request body compares and
// the files the collision check reads all go through Split, so they are
// cut into documents by one rule, the apiserver tooling's
// (k8s.io/apimachinery/pkg/util/yaml's YAMLReader, which kubectl uses):
//
//   - a line starting with "---" and followed only by spaces or a comment
//     ("--- # next") separates documents;
//   - a line starting with "---" and followed by anything else
//     ("--- {kind: X}", "--- |") is an error, not a document silently
//     merged or dropped;
//   - a "..." end marker followed by more content in the same document is
//     an error too: YAML reads that content as another document, but the
//     apiserver's tooling (and a YAML decoder asked for one document)
//     silently drops it;
//   - so is a carriage return not followed by a newline: YAML reads it as
//     a line break (so "a\r---" holds two documents), the apiserver's
//     tooling does not.
package yamlstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Document is one document of a stream.
type Document struct {
	// Data is the document's text as the YAMLReader returns it (its lines,
	// each ended by a newline; a carriage return before it is dropped).
	Data []byte
	// Line is the line of the stream (from 1) that Data starts at.
	Line int
}

// Error is a stream that cannot be cut into documents; Line is where.
type Error struct {
	Line int
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Split cuts data into its documents. Documents holding only blanks and
// comments are kept (a caller numbering documents counts them); the
// separator lines are not part of any. On error the documents before the
// faulty one are returned with it.
func Split(data []byte) ([]Document, error) {
	if at := bareCR(data); at >= 0 {
		return nil, &Error{Line: bytes.Count(data[:at], []byte("\n")) + 1, Err: errors.New(
			`a carriage return not followed by a newline: YAML reads it as a line break, which Kubernetes tooling does not; use "\n" or "\r\n" line endings`)}
	}
	feed := &lineFeeder{data: data}
	r := utilyaml.NewYAMLReader(bufio.NewReader(feed))
	var docs []Document
	for {
		before := feed.lines()
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, &Error{Line: feed.lines(), Err: err}
		}
		// The YAMLReader skips no line but the separator that ends a
		// document (a first "---" stays with its document), so a document
		// starts on the line after those consumed before it.
		line := before + 1
		if at := endMarkerThenContent(doc); at >= 0 {
			return docs, &Error{Line: line + at, Err: errors.New(`content after a "..." document end marker: YAML reads it as another document, which Kubernetes tooling drops; separate documents with "---"`)}
		}
		docs = append(docs, Document{Data: bytes.Clone(doc), Line: line})
	}
}

// bareCR returns the offset of the first carriage return in data that is
// not followed by a newline, or -1.
func bareCR(data []byte) int {
	for i := bytes.IndexByte(data, '\r'); i >= 0; {
		if i+1 >= len(data) || data[i+1] != '\n' {
			return i
		}
		next := bytes.IndexByte(data[i+1:], '\r')
		if next < 0 {
			return -1
		}
		i += 1 + next
	}
	return -1
}

// endMarkerThenContent returns the 0-based line, within doc, of the first
// line with content that follows a "..." end marker, or -1.
func endMarkerThenContent(doc []byte) int {
	ended := false
	for i, line := range bytes.Split(doc, []byte("\n")) {
		if ended {
			if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
				return i
			}
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("...")); ok {
			if t := bytes.TrimSpace(rest); len(t) == 0 || t[0] == '#' {
				ended = true
			}
		}
	}
	return -1
}

// lineFeeder hands data to the YAMLReader's bufio.Reader one line per Read,
// so the bytes it has handed out are exactly the lines the YAMLReader has
// consumed (bufio reads only when it holds no whole line).
type lineFeeder struct {
	data []byte
	pos  int
	nl   int // newlines in data[:pos]
}

func (f *lineFeeder) Read(p []byte) (int, error) {
	if f.pos >= len(f.data) {
		return 0, io.EOF
	}
	rest := f.data[f.pos:]
	n := bytes.IndexByte(rest, '\n') + 1
	if n == 0 {
		n = len(rest)
	}
	n = copy(p, rest[:n])
	f.nl += bytes.Count(rest[:n], []byte("\n"))
	f.pos += n
	return n, nil
}

// lines is how many lines have been handed out (a last line without a
// newline counts once it is whole).
func (f *lineFeeder) lines() int {
	n := f.nl
	if f.pos == len(f.data) && f.pos > 0 && f.data[f.pos-1] != '\n' {
		n++
	}
	return n
}
