package publish

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"sigs.k8s.io/yaml"

	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// SyncIndexFile is the index Scribe keeps at the repository path when
// GitOptions.SyncIndex is set: a kustomization listing every
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

// checkSyncIndexIn fails when the tree holds, at dir's sync index, a file
// or directory Scribe did not write.
func checkSyncIndexIn(src layeredStorer, cache map[plumbing.Hash]*object.Tree, root plumbing.Hash, dir, display string) error {
	file := path.Join(dir, SyncIndexFile)
	parent := root
	if dir != "" {
		var err error
		if parent, err = lookupPath(src, cache, root, dir); err != nil || parent.IsZero() {
			return err
		}
	}
	t, ok := cache[parent]
	if !ok {
		var err error
		if t, err = object.GetTree(src, parent); err != nil {
			return fmt.Errorf("read tree %s: %w", parent, err)
		}
		cache[parent] = t
	}
	var entry *object.TreeEntry
	for i := range t.Entries {
		if t.Entries[i].Name == SyncIndexFile {
			entry = &t.Entries[i]
		}
	}
	switch {
	case entry == nil:
		return nil
	case entry.Mode == filemode.Dir || entry.Mode == filemode.Submodule || entry.Mode == filemode.Symlink:
		return SyncIndexConflict("publish to", display, file, fmt.Errorf("it is not a regular file"))
	}
	blob, err := object.GetBlob(src, entry.Hash)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	r, err := blob.Reader()
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, 8<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if err := CheckSyncIndex(data); err != nil {
		return SyncIndexConflict("publish to", display, file, err)
	}
	return nil
}

// writeSyncIndex rewrites the index of every repository path the edits touch.
func writeSyncIndex(src layeredStorer, objs *memory.ObjectStorage, tree plumbing.Hash, edits []pathChange, display string) (plumbing.Hash, bool, error) {
	idx := newTreeEdit()
	seen := map[string]bool{}
	cache := map[plumbing.Hash]*object.Tree{}
	for _, pc := range edits {
		p := strings.TrimPrefix(path.Clean(pc.RepoPath), ".")
		if seen[p] {
			continue
		}
		seen[p] = true
		files, err := syncFiles(src, cache, tree, p)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if err := checkSyncIndexIn(src, cache, tree, p, display); err != nil {
			return plumbing.ZeroHash, false, err
		}
		data, err := SyncIndexData(files)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		d := idx.dir(p)
		blob, err := putBlob(objs, data)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		d.files[SyncIndexFile] = blob
	}
	return idx.apply(src, objs, tree)
}

// syncFiles lists <ns>/<kind>/<name>.sync.yaml below dir, sorted.
func syncFiles(src layeredStorer, cache map[plumbing.Hash]*object.Tree, root plumbing.Hash, dir string) ([]string, error) {
	h := root
	if dir != "" {
		var err error
		if h, err = lookupPath(src, cache, root, dir); err != nil || h.IsZero() {
			return nil, err
		}
	}
	var out []string
	var walk func(h plumbing.Hash, prefix string, depth int) error
	walk = func(h plumbing.Hash, prefix string, depth int) error {
		t, err := object.GetTree(src, h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			switch {
			case depth < 2 && e.Mode == filemode.Dir:
				if err := walk(e.Hash, prefix+e.Name+"/", depth+1); err != nil {
					return err
				}
			case depth == 2 && e.Mode != filemode.Dir && strings.HasSuffix(e.Name, ".sync.yaml"):
				out = append(out, prefix+e.Name)
			}
		}
		return nil
	}
	if err := walk(h, "", 0); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}
