package gitsink

// Longer than 500 lines on purpose: one idea, which CR holds which object
// in a tree, with the identity cache that keeps it cheap on big
// repositories; its parts are used only together.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"go.yaml.in/yaml/v3"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/yamlstream"
)

// Objects of different custom resources must not share an identity (API
// group, kind, namespace, name): the second would take the first one's
// object over through Git (a Workload "attacker" rendering a Service named
// like Workload "checkout"'s). Before a commit, the Git sink checks every
// object a change renders, and its sync objects, against what the other
// custom resources' owned paths already hold under the same repository
// path, and against the other changes of the batch. A change that collides
// fails with publish.ReasonObjectConflict and is not committed, together with the
// other changes of its Publish call (a call succeeds or fails as a whole);
// the other calls of the batch still land. Within a batch, the change that
// comes first keeps the object.

// objectKey is an object's identity: group/kind/namespace/name.
type objectKey string

func keyOf(apiVersion, kind, namespace, name string) objectKey {
	group, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group = "" // "v1": the core group
	}
	return objectKey(group + "/" + kind + "/" + namespace + "/" + name)
}

func (k objectKey) String() string {
	parts := strings.SplitN(string(k), "/", 4)
	kind := parts[1]
	if parts[0] != "" {
		kind += "." + parts[0]
	}
	if parts[2] == "" {
		return kind + " " + parts[3]
	}
	return kind + " " + parts[2] + "/" + parts[3]
}

// heldObject is an object found in the tree, with the file it is in
// (relative to its owned directory's parent, e.g. "web/service-web.yaml").
type heldObject struct {
	key  objectKey
	file string
}

// identityCache maps a blob or owned tree's hash to the objects it holds,
// so each is parsed once for the life of the Git publisher. It is dropped
// whole when it grows past maxIdentityCache entries.
type identityCache struct {
	mu sync.Mutex
	m  map[plumbing.Hash][]heldObject
	// ns holds the index of each namespace directory's tree (see
	// namespaceIndex); nsSize counts the claims in it.
	ns     map[plumbing.Hash]nsIndex
	nsSize int
}

const maxIdentityCache = 100_000

func (c *identityCache) getNS(h plumbing.Hash) (nsIndex, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.ns[h]
	return v, ok
}

func (c *identityCache) putNS(h plumbing.Hash, v nsIndex, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ns == nil || c.nsSize+size > 2*maxIdentityCache {
		c.ns, c.nsSize = map[plumbing.Hash]nsIndex{}, 0
	}
	c.ns[h] = v
	c.nsSize += size
}

func (c *identityCache) get(h plumbing.Hash) ([]heldObject, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[h]
	return v, ok
}

func (c *identityCache) put(h plumbing.Hash, v []heldObject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxIdentityCache {
		c.m = map[plumbing.Hash][]heldObject{}
	}
	c.m[h] = v
}

// objectsOf parses the identities of the Kubernetes objects in a YAML
// stream. Documents that are not objects (no kind or name) are skipped: the
// check is about objects that would be applied; a stream that does not
// parse is read up to its first bad document (the applier will fail on it
// anyway).
func objectsOf(data []byte, file string) []heldObject {
	// Most of a manifest is its spec: parse only the lines that can hold
	// the identity, and the whole stream only when they do not parse alone.
	if out, ok := decodeObjects(identityLines(data), file); ok {
		return out
	}
	out, _ := decodeObjects(data, file)
	return out
}

// identityLines keeps, of a YAML stream, the document markers, the
// top-level lines and the direct children of a top-level metadata block:
// every line an object's apiVersion, kind, name and namespace can be on in
// block style. A flow-style or multi-line identity makes the result fail
// to parse or lack a kind or name, and objectsOf then parses the whole
// stream.
func identityLines(data []byte) []byte {
	out := make([]byte, 0, 256)
	inMeta, childIndent := false, -1
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		content := bytes.TrimLeft(line, " ")
		indent := len(line) - len(content)
		if len(bytes.TrimSpace(content)) == 0 || content[0] == '#' {
			continue
		}
		if indent == 0 {
			inMeta, childIndent = bytes.Equal(bytes.TrimRight(content, " \r\n"), []byte("metadata:")), -1
			out = append(out, line...)
			continue
		}
		if !inMeta {
			continue
		}
		if childIndent < 0 {
			childIndent = indent
		}
		if indent == childIndent {
			out = append(out, line...)
		}
	}
	return out
}

// decodeObjects decodes every document of a YAML stream, cut by the one
// rule every reader of Scribe uses (yamlstream.Split); ok is false when
// the stream cannot be cut or a document does not parse.
func decodeObjects(data []byte, file string) (out []heldObject, ok bool) {
	docs, err := yamlstream.Split(data)
	ok = err == nil
	for _, d := range docs {
		if len(bytes.TrimSpace(d.Data)) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name      string `yaml:"name"`
				Namespace string `yaml:"namespace"`
			} `yaml:"metadata"`
		}
		if yamlstream.CheckDecodedSize(d.Data, yamlstream.MaxDecodedSize) != nil {
			return out, false
		}
		if err := yaml.Unmarshal(d.Data, &meta); err != nil {
			return out, false
		}
		if meta.Kind == "" || meta.Metadata.Name == "" {
			ok = false // not an object, or its identity is not in block style
			continue
		}
		out = append(out, heldObject{key: keyOf(meta.APIVersion, meta.Kind, meta.Metadata.Namespace, meta.Metadata.Name), file: file})
	}
	return out, ok
}

func blobObjects(src layeredStorer, ids *identityCache, h plumbing.Hash, file string) ([]heldObject, error) {
	if v, ok := ids.get(h); ok {
		return v, nil
	}
	b, err := object.GetBlob(src, h)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	data, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	v := objectsOf(data, file)
	ids.put(h, v)
	return v, nil
}

// ownedDirObjects returns the objects of the owned directory tree h (named
// name): every *.yaml file in it but its kustomization.
func ownedDirObjects(src layeredStorer, ids *identityCache, h plumbing.Hash, name string) ([]heldObject, error) {
	if v, ok := ids.get(h); ok {
		return v, nil
	}
	t, err := object.GetTree(src, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	// Only Scribe's own directories (render always writes .scribe.json)
	// are another custom resource's: a directory of foreign files merely
	// shaped like one is nobody's, and Flux applies it through nothing.
	if !slices.ContainsFunc(t.Entries, func(e object.TreeEntry) bool { return e.Name == ".scribe.json" }) {
		ids.put(h, nil)
		return nil, nil
	}
	var out []heldObject
	for _, e := range t.Entries {
		if e.Mode == filemode.Dir || !strings.HasSuffix(e.Name, ".yaml") || e.Name == "kustomization.yaml" {
			continue
		}
		objs, err := blobObjects(src, ids, e.Hash, e.Name)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			out = append(out, heldObject{key: o.key, file: name + "/" + o.file})
		}
	}
	ids.put(h, out)
	return out, nil
}

// claim is an object held in the tree by the custom resource whose owned
// directory is owner (repository-relative).
type claim struct {
	owner string
	file  string
}

// nsIndex holds the objects below one namespace directory by identity,
// owners relative to it (<kind>/<name>).
type nsIndex map[objectKey][]claim

// namespaceIndex indexes the owned directories (<kind>/<name>/, beside
// their <kind>/<name>.sync.yaml and holding .scribe.json) and sync files
// of the namespace directory tree h. It is
// cached by the tree's hash: a commit re-indexes only the namespaces it
// changed, and of those only the owned directories that changed.
func namespaceIndex(src layeredStorer, ids *identityCache, h plumbing.Hash) (nsIndex, error) {
	if v, ok := ids.getNS(h); ok {
		return v, nil
	}
	t, err := object.GetTree(src, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	idx, size := nsIndex{}, 0
	for _, ke := range t.Entries {
		if ke.Mode != filemode.Dir {
			continue
		}
		kt, err := object.GetTree(src, ke.Hash)
		if err != nil {
			return nil, fmt.Errorf("read tree %s: %w", ke.Hash, err)
		}
		// Scribe writes <name>/ and <name>.sync.yaml together: a directory
		// without its sync file is not Scribe's, and is not even read.
		syncs := map[string]bool{}
		for _, e := range kt.Entries {
			if e.Mode != filemode.Dir && strings.HasSuffix(e.Name, ".sync.yaml") {
				syncs[strings.TrimSuffix(e.Name, ".sync.yaml")] = true
			}
		}
		for _, e := range kt.Entries {
			var objs []heldObject
			owner := ke.Name + "/" + e.Name
			switch {
			case e.Mode == filemode.Dir && syncs[e.Name]:
				objs, err = ownedDirObjects(src, ids, e.Hash, e.Name)
			case strings.HasSuffix(e.Name, ".sync.yaml"):
				owner = strings.TrimSuffix(owner, ".sync.yaml")
				objs, err = blobObjects(src, ids, e.Hash, e.Name)
			}
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				idx[o.key] = append(idx[o.key], claim{owner: owner, file: o.file})
				size++
			}
		}
	}
	ids.putNS(h, idx, size)
	return idx, nil
}

// heldIn returns, for every object in want, which custom resources'
// owned paths below dir in the tree root hold it.
func heldIn(src layeredStorer, ids *identityCache, trees map[plumbing.Hash]*object.Tree, root plumbing.Hash, dir string, want map[objectKey]bool) (map[objectKey][]claim, error) {
	if root.IsZero() {
		return nil, nil // a branch that does not exist yet holds nothing
	}
	h := root
	if dir != "" {
		var err error
		if h, err = lookupPath(src, trees, root, dir); err != nil || h.IsZero() {
			return nil, err
		}
	}
	t, err := object.GetTree(src, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	held := map[objectKey][]claim{}
	for _, e := range t.Entries {
		if e.Mode != filemode.Dir {
			continue
		}
		idx, err := namespaceIndex(src, ids, e.Hash)
		if err != nil {
			return nil, err
		}
		for k := range want {
			for _, c := range idx[k] {
				held[k] = append(held[k], claim{owner: path.Join(dir, e.Name, c.owner), file: c.file})
			}
		}
	}
	return held, nil
}

// changeObjects lists what a change puts into the cluster: the rendered
// objects and its sync objects.
func changeObjects(c publish.Change) []scribev1.ObjectIdentity {
	if c.Delete || c.Bundle == nil {
		return nil
	}
	out := append([]scribev1.ObjectIdentity(nil), c.Bundle.Objects...)
	if c.Bundle.SyncSource != nil {
		out = append(out, *c.Bundle.SyncSource)
	}
	if c.Bundle.Sync.Kind != "" {
		out = append(out, c.Bundle.Sync)
	}
	return out
}

// collisions finds the units of edits whose objects another custom
// resource already holds (in tree, under the same repository path, and not
// replaced by this batch) or that an earlier change of the batch renders.
// A rejected unit keeps its old content, which may make others collide,
// so it repeats until nothing more is rejected.
func collisions(src layeredStorer, ids *identityCache, tree plumbing.Hash, edits []pathChange, display string) (map[int]error, error) {
	want := map[string]map[objectKey]bool{} // by repository path
	for _, pc := range edits {
		for _, o := range changeObjects(pc.Change) {
			if want[pc.RepoPath] == nil {
				want[pc.RepoPath] = map[objectKey]bool{}
			}
			want[pc.RepoPath][keyOf(o.APIVersion, o.Kind, o.Namespace, o.Name)] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	repoPaths := make([]string, 0, len(want))
	for p := range want {
		repoPaths = append(repoPaths, p)
	}
	sort.Strings(repoPaths)
	trees := map[plumbing.Hash]*object.Tree{}
	held := map[string]map[objectKey][]claim{}
	for _, p := range repoPaths {
		h, err := heldIn(src, ids, trees, tree, p, want[p])
		if err != nil {
			return nil, err
		}
		held[p] = h
	}

	rejected := map[int]error{}
	for {
		replaced := map[string]bool{}
		for _, pc := range edits {
			if rejected[pc.unit] == nil {
				replaced[pc.dir()] = true
			}
		}
		type owner struct {
			dir, file string
			batch     *pathChange
		}
		claims := map[string]owner{} // repository path + key
		for _, p := range repoPaths {
			for k, cs := range held[p] {
				for _, c := range cs {
					if !replaced[c.owner] {
						claims[p+"\x00"+string(k)] = owner{dir: c.owner, file: c.file}
					}
				}
			}
		}
		more := false
		for i := range edits {
			pc := &edits[i]
			if rejected[pc.unit] != nil {
				continue
			}
			for _, o := range changeObjects(pc.Change) {
				k := keyOf(o.APIVersion, o.Kind, o.Namespace, o.Name)
				ck := pc.RepoPath + "\x00" + string(k)
				prev, taken := claims[ck]
				if !taken {
					claims[ck] = owner{dir: pc.dir(), batch: pc}
					continue
				}
				if prev.dir == pc.dir() {
					continue
				}
				by := fmt.Sprintf("the custom resource whose files are at %s/ (in %s)", prev.dir, path.Join(path.Dir(prev.dir), prev.file))
				if prev.batch != nil {
					by = fmt.Sprintf("%s %s/%s, published in the same commit", prev.batch.Source.Kind, prev.batch.Source.Namespace, prev.batch.Source.Name)
				} else if src, ok := provenanceOf(src, trees, tree, prev.dir); ok {
					by = fmt.Sprintf("%s %s/%s (files at %s/, object in %s)", src.Kind, src.Namespace, src.Name, prev.dir, path.Join(path.Dir(prev.dir), prev.file))
				}
				rejected[pc.unit] = &publish.Error{Reason: publish.ReasonObjectConflict, Op: "publish to", URL: display,
					Err: fmt.Errorf("%s %s/%s renders %s, which %s already publishes under %s; Scribe does not let one custom resource take over another's object",
						pc.Source.Kind, pc.Source.Namespace, pc.Source.Name, k, by, pathOrRoot(pc.RepoPath)),
					Hint: "rename the object in one of the two custom resources, or delete the other one first"}
				more = true
				break
			}
			if more {
				break // start over without the rejected unit's claims
			}
		}
		if !more {
			return rejected, nil
		}
	}
}

func pathOrRoot(p string) string {
	if p == "" || p == "." {
		return "the repository root"
	}
	return p + "/"
}

// provenanceOf reads the source a Scribe-owned directory records in its
// .scribe.json, for naming it in messages.
func provenanceOf(src layeredStorer, trees map[plumbing.Hash]*object.Tree, root plumbing.Hash, dir string) (scribev1.ObjectIdentity, bool) {
	h, err := lookupPath(src, trees, root, dir+"/.scribe.json")
	if err != nil || h.IsZero() {
		return scribev1.ObjectIdentity{}, false
	}
	b, err := object.GetBlob(src, h)
	if err != nil {
		return scribev1.ObjectIdentity{}, false
	}
	r, err := b.Reader()
	if err != nil {
		return scribev1.ObjectIdentity{}, false
	}
	defer func() { _ = r.Close() }()
	var p struct {
		Source scribev1.ObjectIdentity `json:"source"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&p); err != nil || p.Source.Kind == "" {
		return scribev1.ObjectIdentity{}, false
	}
	return p.Source, true
}

// rememberIdentities puts into the cache the objects of the owned
// directories and sync files the edits wrote, as their bundles declare
// them (render lists every object it writes, in file order), so the next
// commit's check neither reads them back from the Git cache nor parses
// them. A bundle that declares no objects is left to be parsed when it is
// met.
func rememberIdentities(src layeredStorer, ids *identityCache, tree plumbing.Hash, edits []pathChange) error {
	trees := map[plumbing.Hash]*object.Tree{}
	for _, pc := range edits {
		if pc.Delete || pc.Bundle == nil || len(pc.Bundle.Objects) == 0 {
			continue
		}
		dir := pc.dir()
		name := path.Base(dir)
		h, err := lookupPath(src, trees, tree, dir)
		if err != nil {
			return err
		}
		if !h.IsZero() {
			// The files of the objects, when they pair off in order.
			var files []string
			for _, f := range pc.Bundle.Files {
				base := path.Base(f.Path)
				if path.Dir(f.Path) == pc.Bundle.Dir && strings.HasSuffix(base, ".yaml") && base != "kustomization.yaml" {
					files = append(files, base)
				}
			}
			held := make([]heldObject, 0, len(pc.Bundle.Objects))
			for i, o := range pc.Bundle.Objects {
				file := name + "/"
				if len(files) == len(pc.Bundle.Objects) {
					file += files[i]
				}
				held = append(held, heldObject{key: keyOf(o.APIVersion, o.Kind, o.Namespace, o.Name), file: file})
			}
			ids.put(h, held)
		}
		if h, err = lookupPath(src, trees, tree, dir+".sync.yaml"); err != nil {
			return err
		}
		if !h.IsZero() {
			var held []heldObject
			for _, o := range changeObjects(pc.Change)[len(pc.Bundle.Objects):] {
				held = append(held, heldObject{key: keyOf(o.APIVersion, o.Kind, o.Namespace, o.Name), file: name + ".sync.yaml"})
			}
			ids.put(h, held)
		}
	}
	return nil
}
