package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/scribe-gitops/scribe/render"
)

// plainPath matches a bundle path that is written into the `# Source:`
// comment as it is; any other path is written Go-quoted, so no byte of it
// can end the comment line.
var plainPath = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// writeStream writes the manifests of bundles to w as one YAML stream,
// each document headed by a `# Source: <path>` comment. Every document goes
// through a YAML encoder: each file is decoded (it must hold exactly one
// document; a bundle's sync file one object per document) and re-encoded, with the header as the document's comment, so
// neither a path nor a value can end a document or start another one.
// The encoder's layout (2-space indent, sequences not indented under their
// key) is the one render writes files with, so each document's bytes are
// the file's, except that a string longer than a line, which the file
// folds over several lines, is written on one.
func writeStream(ctx context.Context, w io.Writer, bundles []*render.Bundle) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	for _, b := range bundles {
		for _, file := range b.Files {
			if !isManifest(file.Path) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			// The sync file is the one render writes as several documents
			// (the CR's own source or AppProject, then its applier object).
			docs, err := documents(file.Data, b.Dir+".sync.yaml" == file.Path)
			if err != nil {
				return fmt.Errorf("%s: %w", strconv.Quote(file.Path), err)
			}
			for _, doc := range docs {
				doc.Content[0].HeadComment = "Source: " + sourcePath(file.Path)
				if err := enc.Encode(doc); err != nil {
					return fmt.Errorf("encode %s: %w", strconv.Quote(file.Path), err)
				}
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return fmt.Errorf("write stdout: %w", err)
			}
			buf.Reset()
		}
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}

// sourcePath is path as the `# Source:` comment shows it.
func sourcePath(p string) string {
	if plainPath.MatchString(p) {
		return p
	}
	return strconv.Quote(p)
}

// documents decodes data: exactly one YAML object, or with several one
// object per document (at least one).
func documents(data []byte, several bool) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("rendered file is not YAML: %w", err)
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			return nil, fmt.Errorf("rendered file is not one YAML object per document")
		}
		if len(docs) == 1 && !several {
			return nil, fmt.Errorf("rendered file holds more than one YAML document")
		}
		docs = append(docs, &doc)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("rendered file holds no YAML document")
	}
	return docs, nil
}
