package publish

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// SyncIndexFile is the index Scribe keeps at the repository path when
// gitsink.Options.SyncIndex is set: a kustomization listing every
// <namespace>/<kind>/<name>.sync.yaml below it, so one root Flux
// Kustomization (or Argo CD Application) at the path applies exactly the
// per-object sync objects, and each of those applies its own directory.
const SyncIndexFile = "kustomization.yaml"

// SyncIndexMarker is the first line of every sync index Scribe writes.
// Scribe replaces a kustomization.yaml at the index's place only when it
// is its own: it starts with this line and holds nothing but the list of
// sync files (see CheckSyncIndex). Any other file there is someone else's,
// and the publish fails rather than dropping their entries.
const SyncIndexMarker = "# Written by Scribe: every object's sync file below this path."

// syncIndex is the document of a sync index.
type syncIndex struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

const (
	syncIndexAPIVersion = "kustomize.config.k8s.io/v1beta1"
	syncIndexKind       = "Kustomization"
)

// SyncIndexData is the content of the sync index listing files (paths
// relative to the index, sorted): the marker line, then the kustomization
// as a YAML encoder writes it. An empty index stays (resources: []): the
// path must keep existing for the root applier object to prune what the
// last object left.
func SyncIndexData(files []string) ([]byte, error) {
	if files == nil {
		files = []string{}
	}
	doc, err := yaml.Marshal(syncIndex{APIVersion: syncIndexAPIVersion, Kind: syncIndexKind, Resources: files})
	if err != nil {
		return nil, fmt.Errorf("encode sync index: %w", err)
	}
	return append([]byte(SyncIndexMarker+"\n"), doc...), nil
}

// syncFilePath is what a sync index lists: <namespace>/<kind>/<name>.sync.yaml.
var syncFilePath = regexp.MustCompile(`^[^/]+/[^/]+/[^/]+\.sync\.yaml$`)

// CheckSyncIndex says whether data, the content of a sync index's place,
// is a sync index Scribe wrote: its first line is SyncIndexMarker, and it
// is a kustomization with no field but apiVersion, kind and resources, every
// resource a <namespace>/<kind>/<name>.sync.yaml path. The error says what
// makes it someone else's.
func CheckSyncIndex(data []byte) error {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	first, _, _ := bytes.Cut(data, []byte("\n"))
	if strings.TrimRight(string(first), " \t\r") != SyncIndexMarker {
		return fmt.Errorf("its first line is not Scribe's marker %q", SyncIndexMarker)
	}
	if err := yamlstream.CheckDecodedSize(data, yamlstream.MaxDecodedSize); err != nil {
		return fmt.Errorf("it is not a kustomization Scribe writes: %w", err)
	}
	var idx syncIndex
	if err := yaml.UnmarshalStrict(data, &idx); err != nil {
		return fmt.Errorf("it is not a kustomization Scribe writes: %w", err)
	}
	if idx.APIVersion != syncIndexAPIVersion || idx.Kind != syncIndexKind {
		return fmt.Errorf("it is a %s %s, not Scribe's %s %s", idx.APIVersion, idx.Kind, syncIndexAPIVersion, syncIndexKind)
	}
	for i, r := range idx.Resources {
		if !syncFilePath.MatchString(r) || path.Clean(r) != r || strings.Contains(r, "..") {
			return fmt.Errorf("resources[%d] %q is not a sync file Scribe writes (<namespace>/<kind>/<name>.sync.yaml)", i, r)
		}
	}
	return nil
}

// SyncIndexConflict is the error of a sync index's place held by a file
// Scribe did not write (why says what makes it so), named by its path.
func SyncIndexConflict(op, url, file string, why error) error {
	return &Error{Reason: ReasonSyncIndexConflict, Op: op, URL: url,
		Err: fmt.Errorf("%s exists and Scribe did not write it (%w); Scribe does not overwrite it", file, why),
		Hint: "move its entries into a kustomization of your own in another directory and remove " + file +
			" (Scribe then writes its index there, listing every object's .sync.yaml, which your kustomization may include as a resource), or publish to another path"}
}
