package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
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
// before their cluster. scribe publish commits one stage per run (--stage),
// and stage N only when the target already holds every object stage N-1
// delivers (by kind, namespace and name, so a changed param or image does
// not make a stage start over, while a new target's cluster does).

// decideStage says whether b may be published at stage (the --stage flag;
// 0 when not given). prev is the same custom resource rendered at stage-1
// (nil for stage 1 or a kind without stages) and held the objects the
// target holds in its directory, as "Kind namespace/name".
func decideStage(stage int32, b, prev *render.Bundle, held map[string]bool) error {
	if b.Source.Kind != scribev1.ExperimentKind {
		return nil
	}
	obj := publish.ObjectRef(b.Source)
	if stage == 0 {
		return fmt.Errorf("%s: publish commits one stage of an Experiment at a time, as the controller does: pass --stage 1 (clusters), then --stage 2 (components), 3 (workflow templates) and 4 (workflow runs), each once the applier has applied the one before", obj)
	}
	if stage == 1 || prev == nil {
		return nil
	}
	var missing []string
	for _, id := range prev.Objects {
		if k := objectKey(id.Kind, id.Namespace, id.Name); !held[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	more := ""
	if len(missing) > 3 {
		more = fmt.Sprintf(" and %d more", len(missing)-3)
		missing = missing[:3]
	}
	return fmt.Errorf("--stage %d: the target does not hold what stage %d of %s delivers (%s%s): publish --stage %d first, once the applier has applied the stage before it",
		stage, stage-1, obj, strings.Join(missing, ", "), more, stage-1)
}

// objectKey names an object for decideStage.
func objectKey(kind, namespace, name string) string {
	return kind + " " + namespace + "/" + name
}

// checkStages applies decideStage to every bundle. For --stage N past 1
// with an Experiment in the input, it renders the input at stage N-1 and
// reads the objects the target holds.
func (p *publishFlags) checkStages(ctx context.Context, t publishTarget, f *renderFlags, bundles []*render.Bundle) error {
	prev := map[scribev1.ObjectIdentity]*render.Bundle{}
	var held map[string]map[string]bool
	for _, b := range bundles {
		if b.Source.Kind != scribev1.ExperimentKind || f.stage <= 1 || held != nil {
			continue
		}
		before := *f
		before.stage = f.stage - 1
		bs, err := before.renderAll(ctx)
		if err != nil {
			return fmt.Errorf("--stage %d: render stage %d: %w", f.stage, before.stage, err)
		}
		for _, pb := range bs {
			prev[pb.Source] = pb
		}
		if held, err = p.heldObjects(ctx, t, f.path); err != nil {
			return fmt.Errorf("--stage %d: read what the target holds: %w", f.stage, err)
		}
	}
	var errs []error
	for _, b := range bundles {
		if err := decideStage(f.stage, b, prev[b.Source], held[b.Dir]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// heldObjects reads the objects of Experiments' directories under
// repoPath in the target: by bundle directory
// (<namespace>/experiment/<name>), the set of "Kind namespace/name".
func (p *publishFlags) heldObjects(ctx context.Context, t publishTarget, repoPath string) (map[string]map[string]bool, error) {
	base := path.Clean(strings.TrimPrefix(repoPath, "./"))
	inExperiment := func(file string) bool {
		rel := file
		if base != "." {
			var ok bool
			if rel, ok = strings.CutPrefix(file, base+"/"); !ok {
				return false
			}
		}
		parts := strings.Split(rel, "/")
		return len(parts) == 4 && parts[1] == "experiment" && strings.HasSuffix(parts[3], ".yaml")
	}
	var objs []publish.Object
	switch {
	case t.dir != "":
		var err error
		if objs, err = dirObjects(p.out, repoPath, inExperiment); err != nil {
			return nil, err
		}
	case t.git != nil:
		var err error
		if objs, err = t.git.TipObjects(ctx, t.gitOpts, []string{base}, inExperiment); err != nil {
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
			if inExperiment(f) && len(data) <= 1<<20 {
				objs = append(objs, publish.FileObjects(f, data)...)
			}
		}
	}
	held := map[string]map[string]bool{}
	for _, o := range objs {
		dir := path.Dir(o.File)
		if base != "." {
			dir = strings.TrimPrefix(dir, base+"/")
		}
		if held[dir] == nil {
			held[dir] = map[string]bool{}
		}
		held[dir][objectKey(o.Kind, o.Namespace, o.Name)] = true
	}
	return held, nil
}
