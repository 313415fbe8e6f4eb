package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
	"github.com/scribe-gitops/scribe/render/contract"
)

// engineKey carries a built-in engine in a context, for callers that run
// the CLI many times in one process (the fuzz targets) and share one engine
// (safe for concurrent use) instead of building one per run.
type engineKey struct{}

// renderFlags are the flags shared by render, validate and diff.
type renderFlags struct {
	files          []string
	catalogs       []string
	path           string
	applier        string
	applierNS      string
	sourceName     string
	sourceKind     string
	repoURL        string
	revision       string
	gcpProject     string
	fluxURL        string
	fluxSecret     string
	serviceAccount string
	allowedNS      []string
	clusterKinds   []string
	sourceRepos    []string
	stage          int32
	catalogSource  catalogSourceFlags
	// syncNames are the names the target's sync objects carry, by
	// custom resource (publish).
	syncNames sourceNames
}

func (f *renderFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "custom resource file or directory (*.yaml, *.yml, *.json); repeatable")
	fl.StringArrayVar(&f.catalogs, "catalog", nil, "directory with a user component catalog (CUE package catalog); repeatable, later wins")
	fl.StringVar(&f.path, "path", ".", "path in the repository under which <namespace>/<kind>/<name>/ is written")
	fl.StringVar(&f.applier, "applier", "Flux", "applier of the rendered directory: Flux or ArgoCD")
	fl.StringVar(&f.applierNS, "applier-namespace", "", "namespace of the applier objects (default flux-system, or argocd)")
	fl.StringVar(&f.sourceName, "source-name", "scribe", "name of the Flux source that syncs the repository")
	fl.StringVar(&f.sourceKind, "source-kind", "GitRepository", "kind of that Flux source: GitRepository or OCIRepository")
	fl.StringVar(&f.repoURL, "repo-url", "", "repository URL (required with --applier ArgoCD)")
	fl.StringVar(&f.revision, "revision", "main", "branch Argo CD, or each custom resource's own Flux GitRepository, tracks")
	fl.StringVar(&f.fluxURL, "flux-source-url", "", "give each custom resource its own Flux GitRepository (a sparse checkout of its directory) fetching this URL, as the controller does; default: the Kustomizations read --source-name")
	fl.StringVar(&f.fluxSecret, "flux-source-secret", "", "Secret with Flux's Git credentials for --flux-source-url, in the applier namespace")
	fl.StringVar(&f.serviceAccount, "service-account", "", "Flux: service account every rendered Kustomization and HelmRelease applied on the hub runs as (a Repository's spec.applier.serviceAccountName)")
	fl.StringSliceVar(&f.allowedNS, "allowed-namespace", nil, "namespaces besides an Experiment's own that user catalog entries may install into (a Repository's spec.allowedNamespaces); repeatable")
	fl.StringArrayVar(&f.clusterKinds, "cluster-resource", nil, "Argo CD: a cluster-scoped kind, group/kind (\"/Namespace\" for the core group, \"*\" matches any), an Experiment's AppProject allows its components (a TenantPolicy's spec.clusterResources); repeatable, none by default")
	fl.StringArrayVar(&f.sourceRepos, "source-repo", nil, "Argo CD: a URL prefix a user catalog entry's source may be fetched from (a TenantPolicy's spec.sourceRepos); repeatable, none by default")
	fl.StringVar(&f.gcpProject, "gcp-project", "", "GCP project of gke and talos clusters (default scribe-experiments)")
	fl.Int32Var(&f.stage, "stage", 0, "render each Experiment's commit stage N as the controller commits it: 1 clusters, 2 components, 3 workflow templates, 4 workflow runs (default: the final tree); Workloads have no stages")
	f.catalogSource.register(fl)
	_ = cmd.MarkFlagRequired("file")
}

func (f *renderFlags) publish() (render.Publish, error) {
	clean, err := cleanRepoPath(f.path)
	if err != nil {
		return render.Publish{}, err
	}
	f.path = clean
	p := render.Publish{Path: f.path, Applier: render.Applier{Kind: scribev1.ApplierKind(f.applier), Namespace: f.applierNS, Name: f.sourceName, SourceKind: contract.SourceKind(f.sourceKind), RepoURL: f.repoURL, Revision: f.revision}}
	switch p.Applier.Kind {
	case scribev1.ApplierFlux:
		if p.Applier.Namespace == "" {
			p.Applier.Namespace = "flux-system"
		}
		p.Applier.ServiceAccountName = f.serviceAccount
		if k := p.Applier.SourceKind; k != contract.SourceGitRepository && k != contract.SourceOCIRepository {
			return p, fmt.Errorf("--source-kind must be GitRepository or OCIRepository, not %q", f.sourceKind)
		}
		if f.fluxURL != "" {
			if p.Applier.SourceKind != contract.SourceGitRepository {
				return p, fmt.Errorf("--flux-source-url needs --source-kind GitRepository")
			}
			if err := checkNoCredentials("--flux-source-url", f.fluxURL); err != nil {
				return p, err
			}
			p.Applier.FluxSource = &render.FluxGitSource{URL: f.fluxURL, SecretRef: f.fluxSecret}
		} else if f.fluxSecret != "" {
			return p, fmt.Errorf("--flux-source-secret needs --flux-source-url")
		}
	case scribev1.ApplierArgoCD:
		if p.Applier.Namespace == "" {
			p.Applier.Namespace = "argocd"
		}
		if f.repoURL == "" {
			return p, fmt.Errorf("--repo-url is required with --applier ArgoCD")
		}
		if err := checkNoCredentials("--repo-url", f.repoURL); err != nil {
			return p, err
		}
		if f.serviceAccount != "" {
			return p, fmt.Errorf("--service-account needs --applier Flux (Argo CD applies with its own rights, limited by the AppProject)")
		}
	default:
		return p, fmt.Errorf("--applier must be Flux or ArgoCD, not %q", f.applier)
	}
	p.AllowedNamespaces = f.allowedNS
	if len(f.sourceRepos) > 0 && p.Applier.Kind != scribev1.ApplierArgoCD {
		return p, fmt.Errorf("--source-repo needs --applier ArgoCD (Flux fetches a tenant's sources without the platform's credentials)")
	}
	p.SourceRepos = f.sourceRepos
	for _, gk := range f.clusterKinds {
		group, kind, ok := strings.Cut(gk, "/")
		if !ok || kind == "" || strings.Contains(kind, "/") {
			return p, fmt.Errorf("--cluster-resource %q: want group/kind, such as apiextensions.k8s.io/CustomResourceDefinition, /Namespace or */*", gk)
		}
		if p.Applier.Kind != scribev1.ApplierArgoCD {
			return p, fmt.Errorf("--cluster-resource needs --applier ArgoCD (with Flux, the service account's rights bound what is applied)")
		}
		p.ClusterResources = append(p.ClusterResources, scribev1.GroupKind{Group: group, Kind: kind})
	}
	return p, nil
}

// renderAll loads every CR named by --file and renders it. All input errors
// are collected and returned together. It stops with the context's cause
// when ctx is done (SIGINT, SIGTERM): the read loop, the feeding loop and
// every worker check it between documents.
func (f *renderFlags) renderAll(ctx context.Context) ([]*render.Bundle, error) {
	pub, err := f.publish()
	if err != nil {
		return nil, err
	}
	catalogSource, err := f.catalogSource.source()
	if err != nil {
		return nil, err
	}
	// User catalogs are code from someone else: evaluated first in a
	// bounded child process (see render.CatalogBound).
	engine, _ := ctx.Value(engineKey{}).(*render.Engine)
	if engine == nil || len(f.catalogs) > 0 {
		if engine, err = catalogEngine(ctx, f.catalogs); err != nil {
			return nil, err
		}
	}
	files, err := expandFiles(f.files)
	if err != nil {
		return nil, err
	}
	// Read and split every file first, then render every document on
	// GOMAXPROCS workers sharing the engine; results are gathered in input
	// order, so output and errors read as a sequential render's.
	type doc struct {
		file string
		obj  map[string]any
		err  error // reading or splitting the file
		b    *render.Bundle
	}
	var docs []*doc
	for _, file := range files {
		data, err := readInput(ctx, file)
		if err != nil {
			return nil, err
		}
		objs, err := render.ObjectsFromYAML(data)
		if err != nil {
			docs = append(docs, &doc{file: file, err: err})
			continue
		}
		for _, obj := range objs {
			docs = append(docs, &doc{file: file, obj: obj})
		}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("--file: no custom resources in %s", strings.Join(files, ", "))
	}
	work := make(chan *doc)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(docs)) {
		wg.Go(func() {
			for d := range work {
				if ctx.Err() != nil {
					continue
				}
				p := pub
				p.SyncName = f.syncNames.nameFor(d.obj)
				d.b, d.err = engine.Render(ctx, render.Input{Object: d.obj, Publish: p, Resolved: render.Resolved{GCPProject: f.gcpProject, Catalog: catalogSource}, Stage: f.stage})
			}
		})
	}
feed:
	for _, d := range docs {
		if d.err != nil {
			continue
		}
		select {
		case work <- d:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("render stopped: %w", context.Cause(ctx))
	}

	var bundles []*render.Bundle
	var problems []string
	seen := map[string]string{}
	for _, d := range docs {
		if d.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d.file, d.err))
			continue
		}
		b := d.b
		if prev, dup := seen[b.Dir]; dup {
			problems = append(problems, fmt.Sprintf("%s: %s is also rendered from %s", d.file, b.Dir, prev))
			continue
		}
		seen[b.Dir] = d.file
		bundles = append(bundles, b)
	}
	if len(problems) == 0 {
		problems = collisions(bundles)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Dir < bundles[j].Dir })
	return bundles, nil
}

// collisions finds objects that two different custom resources would both
// render: same API group, kind, namespace and name (the version does not
// tell objects apart in the apiserver). Each is one problem naming both
// custom resources and the object.
func collisions(bundles []*render.Bundle) []string {
	type owner struct {
		src scribev1.ObjectIdentity
		obj scribev1.ObjectIdentity
	}
	key := func(o scribev1.ObjectIdentity) string {
		group := ""
		if i := strings.LastIndex(o.APIVersion, "/"); i >= 0 {
			group = o.APIVersion[:i]
		}
		return strings.Join([]string{group, o.Kind, o.Namespace, o.Name}, "\x00")
	}
	srcName := func(s scribev1.ObjectIdentity) string {
		return fmt.Sprintf("%s %s/%s", s.Kind, s.Namespace, s.Name)
	}
	seen := map[string]owner{}
	var problems []string
	for _, b := range bundles {
		objs := append([]scribev1.ObjectIdentity{b.Sync}, b.Objects...)
		if b.SyncSource != nil {
			objs = append(objs, *b.SyncSource)
		}
		mine := map[string]bool{}
		for _, o := range objs {
			if o.Kind == "" || o.Name == "" {
				continue
			}
			k := key(o)
			if mine[k] {
				continue
			}
			mine[k] = true
			prev, dup := seen[k]
			if !dup {
				seen[k] = owner{src: b.Source, obj: o}
				continue
			}
			obj := o.Kind + " " + o.Name
			if o.Namespace != "" {
				obj = o.Kind + " " + o.Namespace + "/" + o.Name
			}
			problems = append(problems, fmt.Sprintf("%s (%s) would be rendered by both %s and %s: objects of different custom resources must not share kind, namespace and name",
				obj, o.APIVersion, srcName(prev.src), srcName(b.Source)))
		}
	}
	return problems
}
