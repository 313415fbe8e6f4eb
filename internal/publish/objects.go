package publish

import (
	"bytes"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// Reading rendered objects back from the repository: the sync files a
// publish keeps the applier names of (Git.SyncObjects, and the CLI's -o
// directory), and the objects a pull request's description lists
// (objectDiff). One reader cuts and identifies them; one walks a tree.

// Object is one Kubernetes object of a file in the repository.
type Object struct {
	// File is the repository path of the file holding it.
	File string
	// Kind, Namespace and Name identify it; any may be empty.
	Kind, Namespace, Name string
	// Doc is its YAML document.
	Doc []byte
}

// FileObjects reads the objects of file's YAML stream data, in document
// order, cut by the one rule every reader of Scribe uses
// (yamlstream.Split, apimachinery's YAML reader); a stream that cannot be
// cut is read up to its faulty document. Empty documents, documents that
// do not decode and documents that would expand past
// yamlstream.MaxDecodedSize are left out: read from the repository,
// whoever wrote them, they expand no further.
func FileObjects(file string, data []byte) []Object {
	docs, _ := yamlstream.Split(data)
	var out []Object
	for _, d := range docs {
		if len(bytes.TrimSpace(d.Data)) == 0 || yamlstream.CheckDecodedSize(d.Data, yamlstream.MaxDecodedSize) != nil {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal(d.Data, &meta) != nil {
			continue
		}
		out = append(out, Object{File: file, Kind: meta.Kind, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name, Doc: d.Data})
	}
	return out
}
