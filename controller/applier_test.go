package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/render"
)

// applierClient is a fake API server holding objs, which knows Argo CD's
// Application kind besides the scheme's.
func applierClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	mapper.Add(argoApplicationGVK(), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	mapper.Add(scribev1.GroupVersion.WithKind(scribev1.TenantPolicyKind), meta.RESTScopeRoot)
	return fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).Build()
}

func argoApp(namespace, name string) *unstructured.Unstructured {
	app := application()
	app.SetNamespace(namespace)
	app.SetName(name)
	return app
}

func annotations(t *testing.T, c client.Client, obj client.Object) map[string]string {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	return obj.GetAnnotations()
}

func TestNewApplierPicksArgoCDOnlyForItsKind(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want scribev1.ApplierKind
	}{
		{"", scribev1.ApplierFlux},
		{"Flux", scribev1.ApplierFlux},
		{"ArgoCD", scribev1.ApplierArgoCD},
	} {
		if got := newApplier(nil, render.Applier{Kind: scribev1.ApplierKind(tc.kind)}).Kind(); got != tc.want {
			t.Errorf("kind %q: applier %s, want %s", tc.kind, got, tc.want)
		}
	}
}

func TestAppliersNudgeTheirOwnObject(t *testing.T) {
	sync := scribev1.ObjectIdentity{Namespace: "argocd", Name: "workload-team-web"}
	for _, tc := range []struct {
		name       string
		in         render.Applier
		nudged     client.Object // what the nudge annotates
		annotation string
	}{
		{"Flux annotates the GitRepository that syncs the repository",
			render.Applier{Kind: "Flux", Namespace: "flux-system", Name: "scribe", SourceKind: "GitRepository"},
			&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe"}}, RequestedAtAnnotation},
		{"Flux annotates the OCIRepository that syncs the repository",
			render.Applier{Kind: "Flux", Namespace: "flux-system", Name: "scribe-oci", SourceKind: "OCIRepository"},
			&sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe-oci"}}, RequestedAtAnnotation},
		{"Argo CD annotates the custom resource's Application",
			render.Applier{Kind: "ArgoCD", Namespace: "argocd", Name: "scribe"},
			argoApp(sync.Namespace, sync.Name), ArgoRefreshAnnotation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := applierClient(t, tc.nudged)
			if err := newApplier(c, tc.in).Nudge(context.Background(), sync, false); err != nil {
				t.Fatal(err)
			}
			if v := annotations(t, c, tc.nudged)[tc.annotation]; v == "" {
				t.Fatalf("%s not set on %s/%s", tc.annotation, tc.nudged.GetNamespace(), tc.nudged.GetName())
			}
		})
	}
}

// With per-CR sources a commit makes Flux fetch only the sources of the
// custom resources it changed; the Repository's source (which feeds the
// root Kustomization of the sync files) only when a sync file changed.
func TestFluxNudgesTheCustomResourcesOwnSourceAndTheRootOnlyWhenItsSyncFileChanged(t *testing.T) {
	sync := scribev1.ObjectIdentity{Namespace: "flux-system", Name: "workload-team-web"}
	in := render.Applier{Kind: "Flux", Namespace: "flux-system", Name: "scribe", SourceKind: "GitRepository",
		FluxSource: &render.FluxGitSource{URL: "http://git.example/acme.git"}}
	for _, tc := range []struct {
		name              string
		own, syncChanged  bool
		wantOwn, wantRoot bool
	}{
		{"a changed directory", true, false, true, false},
		{"a changed sync file", true, true, true, true},
		{"a new custom resource, whose source the root has not applied yet", false, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe"}}
			own := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: sync.Namespace, Name: sync.Name}}
			objs := []client.Object{root}
			if tc.own {
				objs = append(objs, own)
			}
			var patched []string
			c := interceptor.NewClient(applierClient(t, objs...).(client.WithWatch), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					patched = append(patched, obj.GetName())
					return c.Patch(ctx, obj, p, opts...)
				}})
			if err := newApplier(c, in).Nudge(context.Background(), sync, tc.syncChanged); err != nil {
				t.Fatal(err)
			}
			// A source that does not exist yet is not asked at all (no
			// request answered 404).
			if want := map[bool]int{false: 0, true: 1}; len(patched) != want[tc.wantOwn]+want[tc.wantRoot] {
				t.Errorf("patched %v, want the own source %v and the root %v", patched, tc.wantOwn, tc.wantRoot)
			}
			if got := annotations(t, c, root)[RequestedAtAnnotation] != ""; got != tc.wantRoot {
				t.Errorf("root source nudged = %v, want %v", got, tc.wantRoot)
			}
			if tc.own {
				if got := annotations(t, c, own)[RequestedAtAnnotation] != ""; got != tc.wantOwn {
					t.Errorf("own source nudged = %v, want %v", got, tc.wantOwn)
				}
			}
		})
	}
}

// The root Application applies the sync files (the custom resources'
// Applications and AppProjects): Scribe refreshes it only when a commit
// changed a sync file, or the custom resource's Application is not there
// yet.
func TestArgoCDRefreshesTheRootApplicationOnlyWhenTheSyncFileChanged(t *testing.T) {
	sync := scribev1.ObjectIdentity{Namespace: "team", Name: "workload-team-web"}
	in := render.Applier{Kind: "ArgoCD", Namespace: "argocd", Name: "scribe"}
	for _, tc := range []struct {
		name              string
		own, syncChanged  bool
		wantOwn, wantRoot bool
	}{
		{"a changed directory", true, false, true, false},
		{"a changed sync file", true, true, true, true},
		{"a new custom resource, whose Application the root has not applied yet", false, true, false, true},
		{"an Application that went missing", false, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := argoApp("argocd", "scribe")
			own := argoApp(sync.Namespace, sync.Name)
			objs := []client.Object{root}
			if tc.own {
				objs = append(objs, own)
			}
			c := applierClient(t, objs...)
			if err := newApplier(c, in).Nudge(context.Background(), sync, tc.syncChanged); err != nil {
				t.Fatal(err)
			}
			if got := annotations(t, c, root)[ArgoRefreshAnnotation] != ""; got != tc.wantRoot {
				t.Errorf("root Application refreshed = %v, want %v", got, tc.wantRoot)
			}
			if tc.own {
				if got := annotations(t, c, own)[ArgoRefreshAnnotation] != ""; got != tc.wantOwn {
					t.Errorf("own Application refreshed = %v, want %v", got, tc.wantOwn)
				}
			}
		})
	}
}

func TestApplierNudgeOfAMissingObjectIsAnError(t *testing.T) {
	for _, in := range []render.Applier{
		{Kind: "Flux", Namespace: "flux-system", Name: "scribe", SourceKind: "GitRepository"},
		{Kind: "ArgoCD", Namespace: "argocd", Name: "scribe"},
	} {
		if err := newApplier(applierClient(t), in).Nudge(context.Background(), scribev1.ObjectIdentity{Namespace: "argocd", Name: "gone"}, false); err == nil {
			t.Errorf("%s: nudging a missing object succeeded", in.Kind)
		}
	}
}

func TestAppliersSeeTheirSyncObjectGoneOnlyWhenPruned(t *testing.T) {
	sync := scribev1.ObjectIdentity{Namespace: "flux-system", Name: "workload-team-web"}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: sync.Namespace, Name: sync.Name}}
	for _, tc := range []struct {
		name string
		kind string
		objs []client.Object
		gone bool
	}{
		{"Flux with the Kustomization", "Flux", []client.Object{ks.DeepCopy()}, false},
		{"Flux without the Kustomization", "Flux", nil, true},
		{"Flux with only an Application of the name", "Flux", []client.Object{argoApp(sync.Namespace, sync.Name)}, true},
		{"Argo CD with the Application", "ArgoCD", []client.Object{argoApp(sync.Namespace, sync.Name)}, false},
		{"Argo CD without the Application", "ArgoCD", nil, true},
		{"Argo CD with only a Kustomization of the name", "ArgoCD", []client.Object{ks.DeepCopy()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newApplier(applierClient(t, tc.objs...), render.Applier{Kind: scribev1.ApplierKind(tc.kind), Namespace: sync.Namespace, Name: "scribe"})
			gone, err := a.Gone(context.Background(), sync)
			if err != nil || gone != tc.gone {
				t.Fatalf("Gone = %v, %v; want %v", gone, err, tc.gone)
			}
		})
	}
}

func TestAppliersReportAMissingSyncObjectAsNotObservedYet(t *testing.T) {
	sync := scribev1.ObjectIdentity{Namespace: "flux-system", Name: "workload-team-web"}
	same := func(_ context.Context, ours, applied string) (bool, error) { return ours == applied, nil }
	for _, kind := range []string{"Flux", "ArgoCD"} {
		a := newApplier(applierClient(t), render.Applier{Kind: scribev1.ApplierKind(kind), Namespace: sync.Namespace, Name: "scribe"})
		v, err := a.Applied(context.Background(), sync, scribev1.ObjectIdentity{Kind: "Workload", Namespace: "team", Name: "web"}, "clusters/dev", "abc", same)
		if err != nil || v.State != health.Pending || v.Reason != "NotObserved" {
			t.Errorf("%s: Applied = %+v, %v; want Pending/NotObserved", kind, v, err)
		}
	}
}

// The Target's render input carries the tenancy the namespace's
// TenantPolicy grants and the Repository asks for: the policy's
// serviceAccountName with Flux (Argo CD has none) and allowedNamespaces.
func TestResolverGivesTheTargetTheApplierOfItsRepository(t *testing.T) {
	const gitURL = "http://127.0.0.1:1/acme/experiments.git"
	repo := func(kind scribev1.ApplierKind) *scribev1.Repository {
		r := &scribev1.Repository{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"},
			Spec: scribev1.RepositorySpec{
				OCI:               &scribev1.OCIRepositorySpec{URL: "oci://localhost:5000/team/manifests"},
				Applier:           scribev1.ApplierSpec{Kind: kind, Namespace: "gitops", Name: "team", ServiceAccountName: "team-applier"},
				AllowedNamespaces: []string{"cache"},
			},
		}
		if kind == scribev1.ApplierArgoCD { // Argo CD reads Git, not Scribe's OCI artifact
			r.Spec.OCI, r.Spec.Git = nil, &scribev1.GitRepositorySpec{URL: gitURL, Branch: "main", Path: "."}
		}
		return r
	}
	for _, tc := range []struct {
		kind scribev1.ApplierKind
		want render.Applier
	}{
		{"", render.Applier{Kind: "Flux", Namespace: "gitops", Name: "team", SourceKind: "OCIRepository", ServiceAccountName: "team-applier"}},
		{scribev1.ApplierArgoCD, render.Applier{Kind: "ArgoCD", Namespace: "gitops", Name: "team", SourceKind: "GitRepository", RepoURL: gitURL, Revision: "main"}},
	} {
		// The platform's policy grants what the Repository asks for.
		pol := &scribev1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: scribev1.TenantPolicySpec{
			NamespaceSelector:     metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team"}},
			DestinationNamespaces: []string{"cache"},
			Applier:               &scribev1.TenantApplier{Namespaces: []string{"gitops"}, ServiceAccountName: "team-applier"},
		}}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"kubernetes.io/metadata.name": "team"}}}
		r := &Resolver{Client: applierClient(t, pol, ns), Git: gitsink.New(t.TempDir())}
		tg, err := r.For(context.Background(), repo(tc.kind))
		if err != nil {
			t.Fatal(err)
		}
		wantKind := tc.kind
		if wantKind == "" {
			wantKind = scribev1.ApplierFlux
		}
		if tg.Applier.Kind() != wantKind || tg.Input.Applier != tc.want || tg.Applier.RenderInput() != tc.want {
			t.Errorf("kind %q: applier %s with render input %+v (target input %+v); want %s with %+v",
				tc.kind, tg.Applier.Kind(), tg.Applier.RenderInput(), tg.Input.Applier, wantKind, tc.want)
		}
		if !slices.Equal(tg.Input.AllowedNamespaces, []string{"cache"}) {
			t.Errorf("kind %q: allowed namespaces %v, want [cache]", tc.kind, tg.Input.AllowedNamespaces)
		}
	}
}

// Scribe's OCI artifact is Flux's: a Repository with spec.oci applied by
// Argo CD is refused as Invalid, naming both fields, before anything is
// published.
func TestResolverRefusesAnOCIRepositoryAppliedByArgoCD(t *testing.T) {
	repo := &scribev1.Repository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"},
		Spec: scribev1.RepositorySpec{
			OCI:     &scribev1.OCIRepositorySpec{URL: "oci://localhost:5000/team/manifests"},
			Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "scribe"},
		},
	}
	r := &Resolver{Client: applierClient(t)}
	_, err := r.For(context.Background(), repo)
	var re *reasonError
	if !errors.As(err, &re) || re.reason != string(publish.ReasonInvalid) {
		t.Fatalf("For = %v, want an Invalid reason error", err)
	}
	for _, field := range []string{"spec.oci", "spec.applier.kind ArgoCD"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

// A Flux Repository on Git gives every custom resource its own
// GitRepository, copied from the one it names (how Flux, not Scribe,
// reaches the repository); without that one it waits with SourceNotFound.
func TestResolverCopiesTheFluxSourceOfAGitRepository(t *testing.T) {
	repo := &scribev1.Repository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"},
		Spec: scribev1.RepositorySpec{
			Git:     &scribev1.GitRepositorySpec{URL: "http://127.0.0.1:1/acme/experiments.git", Branch: "main", Path: "clusters/dev"},
			Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"},
		},
	}
	timeout := metav1.Duration{Duration: 90 * time.Second}
	// The platform's source reaches the remote by another URL, and says
	// so (RemoteURLsAnnotation); without that it is another repository.
	shared := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe",
		Annotations: map[string]string{RemoteURLsAnnotation: "https://git.example.com/other.git,\n" + repo.Spec.Git.URL}},
		Spec: sourcev1.GitRepositorySpec{URL: "ssh://git@git.internal/acme/experiments.git", Provider: "generic", Timeout: &timeout,
			SecretRef: &fluxmeta.LocalObjectReference{Name: "deploy-key"}, ProxySecretRef: &fluxmeta.LocalObjectReference{Name: "proxy"}}}
	unvouched := shared.DeepCopy()
	unvouched.Annotations = nil
	if _, err := (&Resolver{Client: applierClient(t, unvouched), Git: gitsink.New(t.TempDir())}).For(context.Background(), repo); reasonOf(err) != ReasonNotPermitted || !strings.Contains(err.Error(), RemoteURLsAnnotation) {
		t.Fatalf("a source of the same path on another host, not vouched for: %v; want %s naming %s", err, ReasonNotPermitted, RemoteURLsAnnotation)
	}

	r := &Resolver{Client: applierClient(t, shared), Git: gitsink.New(t.TempDir())}
	tg, err := r.For(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	want := render.FluxGitSource{URL: shared.Spec.URL, SecretRef: "deploy-key", ProxySecretRef: "proxy", Provider: "generic", Timeout: "1m30s"}
	if got := tg.Input.Applier.FluxSource; got == nil || *got != want {
		t.Fatalf("FluxSource = %+v, want %+v", got, want)
	}

	r = &Resolver{Client: applierClient(t), Git: gitsink.New(t.TempDir())}
	if _, err := r.For(context.Background(), repo); reasonOf(err) != ReasonSourceNotFound || !strings.Contains(err.Error(), "flux-system/scribe") {
		t.Fatalf("without the GitRepository: %v (reason %q), want %s naming it", err, reasonOf(err), ReasonSourceNotFound)
	}
	if f := classify(&reasonError{reason: ReasonSourceNotFound, err: errors.New("x")}); !f.Waiting || f.Stalled {
		t.Fatalf("SourceNotFound is handled as %+v; want waiting, not stalled", f)
	}
}

// A controller watching only some namespaces (--watch-namespaces) cannot
// read an applier elsewhere: the Repository stalls and names the field and
// the flag to change, rather than reporting a cache error.
func TestResolverStallsARepositoryWhoseApplierNamespaceIsNotWatched(t *testing.T) {
	repo := &scribev1.Repository{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "shop"},
		Spec: scribev1.RepositorySpec{
			Git:     &scribev1.GitRepositorySpec{URL: "http://127.0.0.1:1/acme/experiments.git", Branch: "main"},
			Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"},
		},
	}
	shared := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-system", Name: "scribe",
		Annotations: map[string]string{RemoteURLsAnnotation: repo.Spec.Git.URL}},
		Spec: sourcev1.GitRepositorySpec{URL: "ssh://git@git.internal/acme/experiments.git"}}
	r := &Resolver{Client: applierClient(t, shared), Git: gitsink.New(t.TempDir()), Watched: []string{"shop"}}
	_, err := r.For(context.Background(), repo)
	if reasonOf(err) != ReasonNamespaceNotWatched || !strings.Contains(err.Error(), `spec.applier.namespace "flux-system"`) || !strings.Contains(err.Error(), "--watch-namespaces shop") {
		t.Fatalf("applier outside --watch-namespaces: %v (reason %q), want %s naming the field and the flag", err, reasonOf(err), ReasonNamespaceNotWatched)
	}
	if f := classify(err); !f.Stalled {
		t.Fatalf("NamespaceNotWatched is handled as %+v; want stalled", f)
	}
	r.Watched = []string{"shop", "flux-system"}
	if _, err := r.For(context.Background(), repo); err != nil {
		t.Fatalf("applier namespace watched: %v", err)
	}
}

// A Repository whose URL carries credentials (one created before the CRD
// refused them, or through a bypass) is Invalid in the resolver, before
// any render or push, and the error never repeats the credential; nor
// does it reach the render input that becomes the sync objects.
func TestResolverRefusesCredentialsInTheRepositoryURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec scribev1.RepositorySpec
	}{
		{"Argo CD over https with a password", scribev1.RepositorySpec{Git: &scribev1.GitRepositorySpec{URL: "https://user:s3cret@127.0.0.1:1/acme/r.git", Branch: "main", Path: "."}, Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "scribe"}}},
		{"https token as the user name", scribev1.RepositorySpec{Git: &scribev1.GitRepositorySpec{URL: "https://s3cret@127.0.0.1:1/acme/r.git", Branch: "main", Path: "."}, Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "scribe"}}},
		{"oci with a password", scribev1.RepositorySpec{OCI: &scribev1.OCIRepositorySpec{URL: "oci://robot:s3cret@localhost:5000/team/m"}, Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierFlux, Namespace: "flux-system", Name: "scribe"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := &scribev1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"}, Spec: tc.spec}
			r := &Resolver{Client: applierClient(t), Git: gitsink.New(t.TempDir())}
			tg, err := r.For(context.Background(), repo)
			var re *reasonError
			if !errors.As(err, &re) || re.reason != string(publish.ReasonInvalid) {
				t.Fatalf("For = %+v, %v; want an Invalid reason error", tg, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error repeats the credential: %v", err)
			}
		})
	}
}

// A Repository whose spec.git.path has a .git component (which the CRD
// now refuses) is Invalid in the resolver too.
func TestResolverRefusesAGitComponentInTheRepositoryPath(t *testing.T) {
	for _, p := range []string{".git", ".git/hooks", "x/.GIT", `a\b`} {
		repo := &scribev1.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "default"},
			Spec: scribev1.RepositorySpec{Git: &scribev1.GitRepositorySpec{URL: "http://127.0.0.1:1/acme/r.git", Branch: "main", Path: p},
				Applier: scribev1.ApplierSpec{Kind: scribev1.ApplierArgoCD, Namespace: "argocd", Name: "scribe"}}}
		r := &Resolver{Client: applierClient(t), Git: gitsink.New(t.TempDir())}
		_, err := r.For(context.Background(), repo)
		var re *reasonError
		if !errors.As(err, &re) || re.reason != string(publish.ReasonInvalid) {
			t.Errorf("path %q: For = %v, want an Invalid reason error", p, err)
		}
	}
}
