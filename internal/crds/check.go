package crds

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// CheckFiles reads files, the paths of p's CRD files in p.Files order (as
// Resolver.Files returns them), and checks them with Check.
func CheckFiles(p Project, files []string) error {
	if len(files) != len(p.Files) {
		return fmt.Errorf("%s: %d files, the table lists %d", p.Name, len(files), len(p.Files))
	}
	data := make([][]byte, len(files))
	for i, f := range files {
		if filepath.Base(f) != p.Files[i] {
			return fmt.Errorf("%s: file %d is %s, the table lists %s", p.Name, i, f, p.Files[i])
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		data[i] = b
	}
	return Check(p, data)
}

// Check checks the contents of p's CRD files, data[i] being that of
// p.Files[i]: each holds exactly one YAML document, an
// apiextensions.k8s.io/v1 CustomResourceDefinition that decodes strictly
// (no unknown or repeated field), and it defines the kind p.Kinds[i]. Every
// file is checked; the error joins what is wrong with each.
func Check(p Project, data [][]byte) error {
	if len(data) != len(p.Files) || len(p.Kinds) != len(p.Files) {
		return fmt.Errorf("%s: %d files to check, the table lists %d files and %d kinds", p.Name, len(data), len(p.Files), len(p.Kinds))
	}
	var errs []error
	for i, d := range data {
		kind, err := crdKind(d)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %w", p.Name, p.Files[i], err))
		case kind != p.Kinds[i]:
			errs = append(errs, fmt.Errorf("%s: %s defines the kind %q, the table lists %q", p.Name, p.Files[i], kind, p.Kinds[i]))
		}
	}
	return errors.Join(errs...)
}

// crdKind returns the kind the one CustomResourceDefinition in data defines.
func crdKind(data []byte) (string, error) {
	docs, err := jsonDocuments(data)
	if err != nil {
		return "", err
	}
	if len(docs) != 1 {
		return "", fmt.Errorf("%d YAML documents, want exactly one CustomResourceDefinition", len(docs))
	}
	var crd apiextensionsv1.CustomResourceDefinition
	dec := json.NewDecoder(bytes.NewReader(docs[0]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&crd); err != nil {
		return "", fmt.Errorf("decode a CustomResourceDefinition: %w", err)
	}
	if crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || crd.Kind != "CustomResourceDefinition" {
		return "", fmt.Errorf("a %s %s, want an %s CustomResourceDefinition", crd.APIVersion, crd.Kind, apiextensionsv1.SchemeGroupVersion)
	}
	if crd.Spec.Names.Kind == "" {
		return "", errors.New("the CustomResourceDefinition names no kind")
	}
	return crd.Spec.Names.Kind, nil
}

// jsonDocuments splits a YAML stream into its documents and converts each
// to JSON, refusing a repeated key, and leaves out empty ones (only
// comments or blank lines).
func jsonDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("split YAML documents: %w", err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", len(docs)+1, err)
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "" {
			continue
		}
		docs = append(docs, j)
	}
}
