package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

// Naming migration, on the publish path: each custom resource's sync file
// (<path>/<namespace>/<kind>/<name>.sync.yaml) is read from the target
// before rendering, and the name of its applier object passed to the
// render, which keeps it when it is the name earlier releases gave that
// very custom resource. So publishing with a new release renames no
// working Kustomization or Application (which would make the applier
// delete what the old one applied).

// syncNames maps a custom resource's sync file to the name of the applier
// object in it.
type syncNames map[string]string

// renames says, one line each, which bundles would give an applier
// object that exists under one name another name.
func (s syncNames) renames(bundles []*render.Bundle) []string {
	var out []string
	for _, b := range bundles {
		if old := s[b.SyncFile]; old != "" && old != b.Sync.Name {
			out = append(out, fmt.Sprintf("%s: %s %s becomes %s", b.SyncFile, b.Sync.Kind, old, b.Sync.Name))
		}
	}
	return out
}

// bySource maps the custom resource of each bundle to the name of the
// applier object its sync file holds, for rendering the bundles again;
// the render answers where a sync file is (Bundle.SyncFile), so the path
// is joined in the templates only.
func (s syncNames) bySource(bundles []*render.Bundle) sourceNames {
	out := sourceNames{}
	for _, b := range bundles {
		if old := s[b.SyncFile]; old != "" {
			out[sourceKey(b.Source.Kind, b.Source.Namespace, b.Source.Name)] = old
		}
	}
	return out
}

// sourceNames maps a custom resource (sourceKey) to the name of the
// applier object its sync file holds.
type sourceNames map[string]string

func sourceKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// nameFor is the current sync object name of obj (a decoded custom
// resource), or "".
func (s sourceNames) nameFor(obj map[string]any) string {
	if len(s) == 0 {
		return ""
	}
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	if kind == "" || ns == "" || name == "" {
		return ""
	}
	return s[sourceKey(kind, ns, name)]
}

// parseSyncNames reads the applier object's name out of each sync file:
// the first Kustomization or Application of the file.
func parseSyncNames(objs []publish.Object) syncNames {
	out := syncNames{}
	for _, o := range objs {
		if _, seen := out[o.File]; seen {
			continue
		}
		if o.Kind == "Kustomization" || o.Kind == "Application" {
			out[o.File] = o.Name
		}
	}
	return out
}

// dirSyncObjects reads the objects of the sync files below root/repoPath
// of a -o directory; a directory that does not exist yet holds none.
func dirSyncObjects(outDir, repoPath string) ([]publish.Object, error) {
	return dirObjects(outDir, repoPath, func(p string) bool { return strings.HasSuffix(p, ".sync.yaml") })
}

// dirObjects reads the objects of the files below root/repoPath of a -o
// directory that keep accepts (by slash path from root); a directory that
// does not exist yet holds none. Files are read as every input is:
// regular files only, below root, bounded.
func dirObjects(outDir, repoPath string, keep func(p string) bool) ([]publish.Object, error) {
	var out []publish.Object
	root, err := os.OpenRoot(outDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	base := path.Clean(strings.TrimPrefix(repoPath, "./"))
	err = fs.WalkDir(root.FS(), base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.Type().IsRegular() && keep(p) {
			data, err := publish.ReadRegular(root, p, 1<<20)
			if err != nil {
				return err
			}
			out = append(out, publish.FileObjects(filepath.ToSlash(p), data)...)
		}
		return nil
	})
	return out, err
}

// existingSyncNames reads the sync files of the publish target: the
// branch of --git, or the -o directory. An OCI artifact is replaced
// whole, and its objects keep no history to migrate from: none.
func (p *publishFlags) existingSyncNames(ctx context.Context, t publishTarget, repoPath string) (syncNames, error) {
	var objs []publish.Object
	var err error
	switch {
	case t.dir != "":
		objs, err = dirSyncObjects(p.out, repoPath)
	case t.git != nil:
		objs, err = t.git.SyncObjects(ctx, t.gitOpts)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseSyncNames(objs), nil
}
