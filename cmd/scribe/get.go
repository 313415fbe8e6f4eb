package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// getFlags are the flags of scribe get.
type getFlags struct {
	kube          kubeFlags
	allNamespaces bool
	watch         bool
}

// getKind is a kind scribe get shows.
type getKind struct {
	// kind is the API kind, e.g. Workload.
	kind string
	// newList is an empty list of the kind.
	newList func() client.ObjectList
}

// parseGetKind accepts a kind's name, plural, short name or plural short
// name, as kubectl does.
func parseGetKind(s string) (getKind, error) {
	switch strings.ToLower(s) {
	case "workload", "workloads", "wl", "wls":
		return getKind{kind: "Workload", newList: func() client.ObjectList { return &scribev1.WorkloadList{} }}, nil
	case "pipeline", "pipelines", "pl", "pls":
		return getKind{kind: "Pipeline", newList: func() client.ObjectList { return &scribev1.PipelineList{} }}, nil
	case "experiment", "experiments", "exp", "exps":
		return getKind{kind: "Experiment", newList: func() client.ObjectList { return &scribev1.ExperimentList{} }}, nil
	}
	return getKind{}, fmt.Errorf("unknown kind %q: want workload (wl), pipeline (pl) or experiment (exp)", s)
}

func newGetCmd() *cobra.Command {
	var f getFlags
	cmd := &cobra.Command{
		Use:   "get workload|pipeline|experiment [NAME]",
		Short: "Show a rollout, a Pipeline's stages or an Experiment as a tree; --watch follows it live",
		Long: `Get shows Workloads (wl), Pipelines (pl) or Experiments (exp) from the
cluster as trees: a Workload's phase, versions and their weights, step k of
n (or the canary's warm-up at weight 0), each analysis check with its last
value, the pull request, Scribe's commit (status.revision) and the revision
its applier reports (the Flux Kustomization's status.lastAppliedRevision,
its lastAppliedOriginRevision when it applied a per-CR artifact, or the
Argo CD Application's status.sync.revision); a Pipeline's stages;
an Experiment's commit stages, targets and workflow.

Without NAME it shows every object of the kind in the namespace (-A: in
every namespace). --watch redraws whenever what it shows changes, from
watches on the API server (not polling) of the kind and of the applier
objects it shows, until Ctrl-C, and then exits 0.

It reads with your kubeconfig, as kubectl does: --kubeconfig, else
$KUBECONFIG, else ~/.kube/config (or the in-cluster config); --context
picks a context; the namespace is -n, else the context's. Named
kubectl-scribe on PATH, the binary is also kubectl's plugin: kubectl
scribe get wl checkout --watch.`,
		Example: `  # A Workload's rollout, redrawn live
  scribe get workload checkout -n shop --watch

  # Every Pipeline in every namespace
  scribe get pl -A

  # An Experiment, through another kubeconfig context
  scribe get exp tutorial -n lab --context staging`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	f.kube.add(fl)
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "every namespace (without NAME)")
	fl.BoolVarP(&f.watch, "watch", "w", false, "redraw on every change until Ctrl-C")
	return cmd
}

func runGet(cmd *cobra.Command, f *getFlags, args []string) error {
	kind, err := parseGetKind(args[0])
	if err != nil {
		return err
	}
	name := ""
	if len(args) == 2 {
		name = args[1]
	}
	if name != "" && f.allNamespaces {
		return errors.New("-A shows every object of a kind; it takes no NAME")
	}
	cfg, ns, err := f.kube.config()
	if err != nil {
		return err
	}
	if f.allNamespaces {
		ns = ""
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	g := &getter{client: c, kind: kind, namespace: ns, name: name, out: cmd.OutOrStdout(), clear: isTerminal(cmd.OutOrStdout())}
	if f.watch {
		return g.watch(cmd.Context())
	}
	objs, _, err := g.list(cmd.Context())
	if err != nil {
		return err
	}
	_, err = io.WriteString(g.out, g.frame(cmd.Context(), objs, nil))
	return err
}

// isTerminal says w is a terminal, where --watch clears the screen before
// each frame; elsewhere frames follow each other.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&fs.ModeCharDevice != 0
}

// getter reads and shows one kind's objects.
type getter struct {
	client    client.WithWatch
	kind      getKind
	namespace string // empty: every namespace
	name      string // empty: every object
	out       io.Writer
	clear     bool
}

// listOptions select the namespace and, with a NAME, the object.
func (g *getter) listOptions(rv string) []client.ListOption {
	opts := []client.ListOption{client.InNamespace(g.namespace)}
	raw := &metav1.ListOptions{ResourceVersion: rv}
	if g.name != "" {
		raw.FieldSelector = fields.OneTermEqualSelector("metadata.name", g.name).String()
	}
	return append(opts, &client.ListOptions{Raw: raw})
}

// list reads the objects, keyed namespace/name, and the list's
// resourceVersion to watch from. A NAME that does not exist is an error.
func (g *getter) list(ctx context.Context) (map[string]client.Object, string, error) {
	list := g.kind.newList()
	if err := g.client.List(ctx, list, g.listOptions("")...); err != nil {
		return nil, "", fmt.Errorf("list %ss: %w", g.kind.kind, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, "", fmt.Errorf("list %ss: %w", g.kind.kind, err)
	}
	objs := make(map[string]client.Object, len(items))
	for _, it := range items {
		o, ok := it.(client.Object)
		if !ok {
			continue
		}
		objs[o.GetNamespace()+"/"+o.GetName()] = o
	}
	if g.name != "" && len(objs) == 0 {
		gr := schema.GroupResource{Group: scribev1.GroupVersion.Group, Resource: strings.ToLower(g.kind.kind) + "s"}
		return nil, "", apierrors.NewNotFound(gr, g.name)
	}
	return objs, list.(metav1.ListInterface).GetResourceVersion(), nil
}

// frame is the text of every object, sorted by namespace and name, then
// the objects deleted since the watch began.
func (g *getter) frame(ctx context.Context, objs map[string]client.Object, deleted map[string]bool) string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		switch o := objs[k].(type) {
		case *scribev1.Workload:
			a := readApplied(ctx, g.client, o.Status.GeneratedResources)
			parts = append(parts, renderWorkload(o, &a))
		case *scribev1.Pipeline:
			parts = append(parts, renderPipeline(o))
		case *scribev1.Experiment:
			a := readApplied(ctx, g.client, o.Status.GeneratedResources)
			parts = append(parts, renderExperiment(o, &a))
		}
	}
	gone := make([]string, 0, len(deleted))
	for k := range deleted {
		gone = append(gone, k)
	}
	sort.Strings(gone)
	for _, k := range gone {
		parts = append(parts, fmt.Sprintf("%s %s: deleted\n", g.kind.kind, clean(k)))
	}
	if len(parts) == 0 {
		where := "namespace " + g.namespace
		if g.namespace == "" {
			where = "any namespace"
		}
		return fmt.Sprintf("No %ss found in %s.\n", g.kind.kind, clean(where))
	}
	return strings.Join(parts, "\n")
}

// readApplied reads the revision the applier reports from the sync
// object, the first of status.generatedResources.objects (a Flux
// Kustomization or an Argo CD Application).
func readApplied(ctx context.Context, c client.Client, gen *scribev1.GeneratedResources) appliedRevision {
	if gen == nil || len(gen.Objects) == 0 {
		return appliedRevision{}
	}
	id := gen.Objects[0]
	a := appliedRevision{Object: id.Kind + " " + id.Namespace + "/" + id.Name}
	var path []string
	switch id.Kind {
	case "Kustomization":
		path = []string{"status", "lastAppliedRevision"}
	case "Application":
		path = []string{"status", "sync", "revision"}
	default:
		a.Note = "not a Flux Kustomization or an Argo CD Application"
		return a
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(id.APIVersion)
	u.SetKind(id.Kind)
	err := c.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		a.Note = "not found"
	case apierrors.IsForbidden(err):
		a.Note = "not readable with this kubeconfig"
	case meta.IsNoMatchError(err):
		a.Note = "the cluster does not serve " + id.APIVersion
	case err != nil:
		a.Note = err.Error()
	default:
		a.Revision, _, _ = unstructured.NestedString(u.Object, path...)
		// From a per-CR artifact, the commit it was made from.
		if origin, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedOriginRevision"); id.Kind == "Kustomization" && origin != "" {
			a.Revision = origin
		}
	}
	return a
}

// watch draws the objects, then redraws whenever the text changes, from a
// watch of the kind and of the applier objects whose revision it shows
// (syncWatch); it re-lists when the API server ends the watch, and returns
// nil when ctx is cancelled.
func (g *getter) watch(ctx context.Context) error {
	objs, rv, err := g.list(ctx)
	if err != nil {
		return err
	}
	deleted := map[string]bool{}
	last := ""
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	syncs := newSyncWatch(g.client)
	draw := func() error {
		syncs.follow(ctx, objs)
		text := g.frame(ctx, objs, deleted)
		if text == last || ctx.Err() != nil {
			return nil
		}
		first := last == ""
		last = text
		if g.clear {
			text = "\x1b[H\x1b[2J" + text
		} else if !first {
			text = "\n" + text
		}
		_, err := io.WriteString(g.out, text)
		return err
	}
	if err := draw(); err != nil {
		return err
	}
	for {
		w, err := g.client.Watch(ctx, g.kind.newList(), g.listOptions(rv)...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %ss: %w", g.kind.kind, err)
		}
		began := time.Now()
		rv, err = g.follow(ctx, w, syncs.changed, objs, deleted, draw)
		w.Stop()
		if err != nil || ctx.Err() != nil {
			return err
		}
		if rv == "" {
			// The watch ended (expired, or the server closed it): list
			// again, and say which objects went meanwhile.
			if time.Since(began) < time.Second {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Second):
				}
			}
			now, listRV, err := g.list(ctx)
			if apierrors.IsNotFound(err) {
				now, err = map[string]client.Object{}, nil
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			for k := range objs {
				if _, ok := now[k]; !ok {
					deleted[k] = true
				}
			}
			for k := range now {
				delete(deleted, k)
			}
			objs, rv = now, listRV
			if rv == "" {
				return fmt.Errorf("list %ss: the API server returned no resourceVersion to watch from", g.kind.kind)
			}
			if err := draw(); err != nil {
				return err
			}
		}
	}
}

// follow applies the watch's events to objs and deleted, drawing after
// each and after each change of a shown object's applier object
// (synced), until the watch ends or ctx is cancelled. It returns the
// resourceVersion to resume from, or "" when a new list is needed.
func (g *getter) follow(ctx context.Context, w watch.Interface, synced <-chan struct{}, objs map[string]client.Object, deleted map[string]bool, draw func() error) (string, error) {
	rv := ""
	for {
		select {
		case <-ctx.Done():
			return "", nil
		case <-synced:
			if err := draw(); err != nil {
				return "", err
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil
			}
			if ev.Type == watch.Error {
				// Expired (410 Gone) or another failure: list again.
				return "", nil
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			key := o.GetNamespace() + "/" + o.GetName()
			switch ev.Type {
			case watch.Added, watch.Modified:
				objs[key] = o
				delete(deleted, key)
			case watch.Deleted:
				delete(objs, key)
				deleted[key] = true
			case watch.Bookmark:
				continue
			}
			if err := draw(); err != nil {
				return "", err
			}
		}
	}
}
