package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/ocisink"
	"github.com/scribe-gitops/scribe/render"
)

// Publishing an Experiment: the controller commits an Experiment in
// stages (1 clusters, 2 components, 3 workflow templates, 4 workflow
// runs), each once the applier has applied the one before, so that a
// Workflow never reaches a cluster before its template, nor components
// before their cluster. scribe publish commits one stage per run, and
// only the stage that follows the one the target holds.

// decideStage says whether a bundle may be published at stage (the
// --stage flag; 0 when not given) to a target that holds held (nil: none)
// of the same custom resource. Only Experiments have stages.
func decideStage(stage int32, b *render.Bundle, held *render.Provenance) error {
	if b.Source.Kind != scribev1.ExperimentKind {
		return nil
	}
	obj := publish.ObjectRef(b.Source)
	if stage == 0 {
		return fmt.Errorf("%s: publish commits one stage of an Experiment at a time, as the controller does: pass --stage 1 (clusters), then --stage 2 (components), 3 (workflow templates) and 4 (workflow runs), each once the applier has applied the one before", obj)
	}
	if stage == 1 {
		return nil
	}
	switch {
	case held == nil:
		return fmt.Errorf("--stage %d: the target does not hold %s yet: publish --stage 1 first", stage, obj)
	case held.Stage == 0:
		// Written without stages (an earlier release): the final tree.
		return nil
	case stage > held.Stage+1:
		return fmt.Errorf("--stage %d: the target holds stage %d of %s: publish --stage %d first, once the applier has applied stage %d", stage, held.Stage, obj, held.Stage+1, held.Stage)
	}
	return nil
}

// checkStages applies decideStage to every bundle, reading what the
// target holds only when an Experiment asks for a stage past 1.
func (p *publishFlags) checkStages(ctx context.Context, t publishTarget, repoPath string, stage int32, bundles []*render.Bundle) error {
	var errs []error
	var held map[string]*render.Provenance
	for _, b := range bundles {
		if b.Source.Kind == scribev1.ExperimentKind && stage > 1 && held == nil {
			var err error
			if held, err = p.heldProvenance(ctx, t, repoPath); err != nil {
				return fmt.Errorf("read what the target holds, for --stage: %w", err)
			}
		}
		if err := decideStage(stage, b, held[b.Dir]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// heldProvenance reads the provenance files (<dir>/.scribe.json) of
// Experiments under repoPath in the target, by bundle directory.
func (p *publishFlags) heldProvenance(ctx context.Context, t publishTarget, repoPath string) (map[string]*render.Provenance, error) {
	base := path.Clean(strings.TrimPrefix(repoPath, "./"))
	isProvenance := func(file string) bool { return path.Base(file) == ".scribe.json" }
	var objs []publish.Object
	switch {
	case t.dir != "":
		root, err := os.OpenRoot(p.out)
		if errors.Is(err, fs.ErrNotExist) {
			return map[string]*render.Provenance{}, nil
		}
		if err != nil {
			return nil, err
		}
		defer func() { _ = root.Close() }()
		err = fs.WalkDir(root.FS(), base, func(f string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return fs.SkipAll
				}
				return err
			}
			if d.Type().IsRegular() && isProvenance(f) {
				data, err := publish.ReadRegular(root, f, 1<<20)
				if err != nil {
					return err
				}
				objs = append(objs, publish.FileObjects(f, data)...)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	case t.git != nil:
		var err error
		if objs, err = t.git.TipObjects(ctx, t.gitOpts, []string{base}, isProvenance); err != nil {
			return nil, err
		}
	default:
		oci, ok := t.sink.(*ocisink.Sink)
		if !ok {
			return nil, fmt.Errorf("cannot read %s", t.where)
		}
		files, err := oci.Fetch(ctx)
		if err != nil {
			return nil, err
		}
		for f, data := range files {
			if isProvenance(f) && len(data) <= 1<<20 {
				objs = append(objs, publish.FileObjects(f, data)...)
			}
		}
	}
	held := map[string]*render.Provenance{}
	for _, o := range objs {
		if o.Kind != "Provenance" {
			continue
		}
		var prov render.Provenance
		if json.Unmarshal(o.Doc, &prov) != nil || prov.Source.Kind != scribev1.ExperimentKind {
			continue
		}
		dir := strings.TrimSuffix(o.File, "/.scribe.json")
		if base != "." {
			dir = strings.TrimPrefix(dir, base+"/")
		}
		held[dir] = &prov
	}
	return held, nil
}
