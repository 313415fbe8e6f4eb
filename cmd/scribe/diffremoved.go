package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/scribe-gitops/scribe/render"
)

// provenanceFile marks a directory Scribe rendered for one custom
// resource: <namespace>/<kind>/<name>/.scribe.json.
const provenanceFile = ".scribe.json"

// renderedTree is a custom resource's tree found in a checkout: its
// directory (<namespace>/<kind>/<name>, relative to --path), the custom
// resource its provenance names, and its files (the sync file included).
type renderedTree struct {
	dir    string
	source string
	files  int
}

// findRenderedTrees lists the trees below base in fsys: every
// <namespace>/<kind>/<name>/ directory holding Scribe's provenance file.
// Hidden entries (.git) are not entered.
func findRenderedTrees(ctx context.Context, fsys fs.FS, base string, read func(string) ([]byte, error)) ([]renderedTree, error) {
	subdirs := func(p string) ([]string, error) {
		entries, err := fs.ReadDir(fsys, p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == base {
				return nil, nil
			}
			return nil, err
		}
		var out []string
		for _, e := range entries {
			if e.IsDir() && !hidden(e.Name()) {
				out = append(out, e.Name())
			}
		}
		return out, nil
	}
	var found []renderedTree
	namespaces, err := subdirs(base)
	if err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		kinds, err := subdirs(path.Join(base, ns))
		if err != nil {
			return nil, err
		}
		for _, kind := range kinds {
			names, err := subdirs(path.Join(base, ns, kind))
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				if err := ctx.Err(); err != nil {
					return nil, context.Cause(ctx)
				}
				dir := path.Join(base, ns, kind, name)
				data, err := read(path.Join(dir, provenanceFile))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, err
				}
				var prov render.Provenance
				if json.Unmarshal(data, &prov) != nil || prov.Kind != "Provenance" {
					continue
				}
				t := renderedTree{dir: path.Join(ns, kind, name), source: fmt.Sprintf("%s %s/%s", prov.Source.Kind, prov.Source.Namespace, prov.Source.Name)}
				err = fs.WalkDir(fsys, dir, func(_ string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						t.files++
					}
					return err
				})
				if err != nil {
					return nil, err
				}
				if _, err := fs.Stat(fsys, dir+".sync.yaml"); err == nil {
					t.files++
				}
				found = append(found, t)
			}
		}
	}
	return found, nil
}

// removedTrees are the trees of found that no custom resource of the
// input renders, sorted by directory: removed, and stages, those named as
// the Workload of a Pipeline's stage (kept). A tree is known by its
// directory only, so a stage's Workload and another Workload of that name
// removed from the input look alike: stages are returned, not dropped, so
// that diff reports them too.
func removedTrees(found []renderedTree, rendered map[string]bool, kept map[string]string) (removed, stages []renderedTree) {
	for _, t := range found {
		switch {
		case rendered[t.dir]:
		case kept[t.dir] != "":
			stages = append(stages, t)
		default:
			removed = append(removed, t)
		}
	}
	byDir := func(ts []renderedTree) {
		sort.Slice(ts, func(i, j int) bool { return ts[i].dir < ts[j].dir })
	}
	byDir(removed)
	byDir(stages)
	return removed, stages
}
