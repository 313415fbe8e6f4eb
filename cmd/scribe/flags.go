package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	addresses      map[string]string
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
	// stdin is the command's standard input, for -f -.
	stdin func() io.Reader
	// loaded and loadedFiles are the documents and files of -f, once read.
	loaded      []inputDoc
	loadedFiles []string
}

func (f *renderFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "custom resource file, directory (*.yaml, *.yml, *.json; hidden files and folders skipped) or - for stdin; repeatable")
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
	registerGCPProject(fl, &f.gcpProject)
	fl.StringToStringVar(&f.addresses, "target-address", nil, "an Experiment target's address, target=address, for {{ targets.<target>.address }} in workflow params (the controller reads it from the target's Gateway, LoadBalancer Service or Ingress); repeatable")
	fl.Int32Var(&f.stage, "stage", 0, "render each Experiment's commit stage N as the controller commits it: 1 clusters, 2 components, 3 workflow templates, 4 workflow runs (default: the final tree); Workloads have no stages")
	f.catalogSource.register(fl)
	f.stdin = cmd.InOrStdin
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

// renderAll loads every CR named by --file and renders it (see checkAll);
// the CRs of kinds that do not render are validated only.
func (f *renderFlags) renderAll(ctx context.Context) ([]*render.Bundle, error) {
	crs, err := f.checkAll(ctx)
	if err != nil {
		return nil, err
	}
	bundles := make([]*render.Bundle, 0, len(crs))
	for _, c := range crs {
		if c.bundle != nil {
			bundles = append(bundles, c.bundle)
		}
	}
	return bundles, nil
}

// checkedCR is one custom resource of the input after its check: the file
// it came from, the object as read, and its bundle when its kind renders
// (Workload, Experiment) or, for the other kinds of Scribe's API, its
// typed form validated as the apiserver would admit it.
type checkedCR struct {
	file   string
	obj    map[string]any
	bundle *render.Bundle
	typed  client.Object
}

// inputs reads the -f arguments once (readInputs); a command that renders
// twice (publish) renders the same input, standard input included.
func (f *renderFlags) inputs(ctx context.Context) ([]inputDoc, []string, error) {
	if f.loaded == nil {
		var stdin io.Reader
		if f.stdin != nil {
			stdin = f.stdin()
		}
		docs, files, err := readInputs(ctx, f.files, stdin)
		if err != nil {
			return nil, nil, err
		}
		f.loaded, f.loadedFiles = docs, files
	}
	return f.loaded, f.loadedFiles, nil
}

// checkAll loads every CR named by --file, renders each Workload and
// Experiment and validates each CR of another kind. All input errors are
// collected and returned together. It stops with the context's cause
// when ctx is done (SIGINT, SIGTERM): the read loop, the feeding loop and
// every worker check it between documents. CRs come back sorted by kind,
// namespace and name.
func (f *renderFlags) checkAll(ctx context.Context) ([]*checkedCR, error) {
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
	// Read and split every file first, then check every document on
	// GOMAXPROCS workers sharing the engine; results are gathered in input
	// order, so output and errors read as a sequential render's.
	type doc struct {
		inputDoc
		b     *render.Bundle
		typed client.Object
	}
	in, files, err := f.inputs(ctx)
	if err != nil {
		return nil, err
	}
	docs := make([]*doc, 0, len(in))
	for _, d := range in {
		docs = append(docs, &doc{inputDoc: d})
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
				if !renders(d.obj) {
					d.typed, d.err = engine.Validate(ctx, d.obj)
					continue
				}
				p := pub
				p.SyncName = f.syncNames.nameFor(d.obj)
				d.b, d.err = engine.Render(ctx, render.Input{Object: d.obj, Publish: p, Resolved: render.Resolved{GCPProject: f.gcpProject, Catalog: catalogSource, TargetAddresses: f.addresses}, Stage: f.stage})
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

	var crs []*checkedCR
	var bundles []*render.Bundle
	var problems []string
	seen := map[string]string{}
	for _, d := range docs {
		if d.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d.file, d.err))
			continue
		}
		var key, how string
		if d.b != nil {
			key, how = d.b.Dir, "rendered from"
		} else {
			kind, _ := d.obj["kind"].(string)
			key, how = crKey(kind, d.typed.GetNamespace(), d.typed.GetName()), "defined in"
		}
		if prev, dup := seen[key]; dup {
			problems = append(problems, fmt.Sprintf("%s: %s is also %s %s", d.file, key, how, prev))
			continue
		}
		seen[key] = d.file
		if d.b != nil {
			bundles = append(bundles, d.b)
		}
		crs = append(crs, &checkedCR{file: d.file, obj: d.obj, bundle: d.b, typed: d.typed})
	}
	if len(problems) == 0 {
		problems = collisions(bundles)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	sort.Slice(crs, func(i, j int) bool { return crs[i].sortKey() < crs[j].sortKey() })
	return crs, nil
}

// renders says whether obj is of a kind render renders (Workload,
// Experiment); any other kind is validated only. An object of no kind of
// Scribe's renders, so its error says what render accepts.
func renders(obj map[string]any) bool {
	switch kind, _ := obj["kind"].(string); kind {
	case scribev1.PipelineKind, scribev1.RepositoryKind, scribev1.TenantPolicyKind:
		return false
	}
	return true
}

// crKey names a CR as Kind/namespace/name (cluster-scoped: Kind/name).
func crKey(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// sortKey orders rendered CRs by their directory, as before, and the
// others after them by kind, namespace and name.
func (c *checkedCR) sortKey() string {
	if c.bundle != nil {
		return "0" + c.bundle.Dir
	}
	return "1" + crKey(c.kind(), c.typed.GetNamespace(), c.typed.GetName())
}

// kind is the CR's kind.
func (c *checkedCR) kind() string {
	k, _ := c.obj["kind"].(string)
	return k
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

// Flag groups that several commands register, each defined once here.

// registerOutput registers -o/--output, the directory a render is written
// to (render, publish); where says where in it, DIR or DIR/<path>.
func registerOutput(fl *pflag.FlagSet, out *string, where string) {
	fl.StringVarP(out, "output", "o", "", "write the repository tree to "+where+" (replaced atomically; it must be new, empty, or written by Scribe before)")
}

// registerGCPProject registers --gcp-project (render, validate, diff,
// publish, controller).
func registerGCPProject(fl *pflag.FlagSet, project *string) {
	fl.StringVar(project, "gcp-project", "", "GCP project of gke and talos clusters whose spec.targets[].cluster.project is empty (no default: such a cluster without either is refused)")
}

// registerKubeconfig registers --kubeconfig; fallback says where the
// command looks without it.
func registerKubeconfig(fl *pflag.FlagSet, kubeconfig *string, fallback string) {
	fl.StringVar(kubeconfig, "kubeconfig", "", "kubeconfig file (default "+fallback+")")
}
