package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/health"
	"github.com/scribe-gitops/scribe/render"
	"github.com/scribe-gitops/scribe/render/contract"
)

// Applier is the GitOps tool that applies what Scribe publishes to one
// Repository: Flux or Argo CD, chosen once per Repository by the Resolver.
// Each custom resource has one sync object (a Flux Kustomization or an Argo
// CD Application) that render writes next to its manifests.
type Applier interface {
	// Kind is the Repository's spec.applier.kind.
	Kind() scribev1.ApplierKind
	// RenderInput is what render needs to write the sync object.
	RenderInput() render.Applier
	// Nudge asks the applier to reconcile sync now instead of at its next
	// poll; syncChanged says the commit also changed the sync object
	// itself (a new, changed or removed .sync.yaml), which the root
	// applier applies.
	Nudge(ctx context.Context, sync scribev1.ObjectIdentity, syncChanged bool) error
	// Applied reads the applier's verdict on commit from sync, the sync
	// object of the custom resource src published under repoPath; anc
	// answers whether a later applied revision still carries commit's
	// paths. An object under sync's name that is not src's own (see
	// DecideOwnSync) is no evidence: Pending, ReasonForeignSyncObject.
	Applied(ctx context.Context, sync, src scribev1.ObjectIdentity, repoPath, commit string, anc health.Ancestry) (health.Verdict, error)
	// Gone reports whether the applier has pruned sync (after the custom
	// resource's removal was published).
	Gone(ctx context.Context, sync scribev1.ObjectIdentity) (bool, error)
}

// Annotations that ask an applier to reconcile now.
const (
	// RequestedAtAnnotation asks a Flux source to reconcile now.
	RequestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"
	// ArgoRefreshAnnotation asks Argo CD to refresh an Application now.
	ArgoRefreshAnnotation = "argocd.argoproj.io/refresh"
)

// argoApplicationGVK is the Argo CD Application kind (no Go module here).
func argoApplicationGVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
}

// newApplier picks the applier of in.Kind; in is also what render gets.
// An unknown or empty kind is Flux, the API's default.
func newApplier(c client.Client, in render.Applier) Applier {
	if in.Kind == scribev1.ApplierArgoCD {
		return &argoApplier{client: c, in: in}
	}
	return &fluxApplier{client: c, in: in}
}

// fluxApplier: a GitRepository or OCIRepository (in.SourceKind
// in.Namespace/in.Name) syncs the repository, and a Kustomization per
// custom resource applies its directory. With in.FluxSource, each custom
// resource has its own GitRepository (named like its Kustomization), and
// the Repository's source only feeds the root Kustomization that applies
// the sync files.
type fluxApplier struct {
	client client.Client
	in     render.Applier
}

func (a *fluxApplier) Kind() scribev1.ApplierKind  { return scribev1.ApplierFlux }
func (a *fluxApplier) RenderInput() render.Applier { return a.in }

// Nudge annotates Flux sources only: annotating the Kustomization too
// races with the source's new artifact. With per-CR sources it annotates
// the custom resource's own GitRepository or OCIRepository (which does not exist before
// the root Kustomization first applied it), and the Repository's source
// only when the sync file changed; otherwise the Repository's source,
// which every Kustomization reads.
func (a *fluxApplier) Nudge(ctx context.Context, sync scribev1.ObjectIdentity, syncChanged bool) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var errs []error
	if kind, ok := a.ownSourceKind(); ok {
		// The own source is asked only once it exists (read from the
		// cache): before the root Kustomization first applies it, the
		// request would only be a 404 (one per new custom resource, 1000
		// in a burst of 1000), and a new source fetches at once.
		key := client.ObjectKey{Namespace: sync.Namespace, Name: sync.Name}
		var probe client.Object = &sourcev1.GitRepository{}
		if kind == contract.SourceOCIRepository {
			probe = &sourcev1.OCIRepository{}
		}
		if err := a.client.Get(ctx, key, probe); err == nil {
			own := fluxSource(string(kind), sync.Namespace, sync.Name)
			if err := annotate(ctx, a.client, own, RequestedAtAnnotation, now); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		} else if !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("get %s %s: %w", kind, key, err))
		}
		if !syncChanged {
			return errors.Join(errs...)
		}
	}
	errs = append(errs, annotate(ctx, a.client, fluxSource(string(a.in.SourceKind), a.in.Namespace, a.in.Name), RequestedAtAnnotation, now))
	return errors.Join(errs...)
}

// ownSourceKind is the kind of each custom resource's own Flux source
// (named like its Kustomization), if it has one: an OCIRepository with
// per-custom-resource artifacts, else a GitRepository with a FluxSource.
func (a *fluxApplier) ownSourceKind() (contract.SourceKind, bool) {
	switch {
	case a.in.FluxArtifact != nil:
		return contract.SourceOCIRepository, true
	case a.in.FluxSource != nil:
		return contract.SourceGitRepository, true
	}
	return "", false
}

// fluxSource names a Flux source object of kind.
func fluxSource(kind, namespace, name string) *unstructured.Unstructured {
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: kind})
	src.SetNamespace(namespace)
	src.SetName(name)
	return src
}

func (a *fluxApplier) Applied(ctx context.Context, sync, src scribev1.ObjectIdentity, repoPath, commit string, anc health.Ancestry) (health.Verdict, error) {
	ks := &kustomizev1.Kustomization{}
	found, err := getSync(ctx, a.client, "Kustomization", sync, ks)
	if !found {
		return notObserved("Kustomization", sync, err)
	}
	// The custom resource's own GitRepository or OCIRepository, or the
	// Repository's source every Kustomization reads.
	source := fluxSourceOf(string(a.in.SourceKind), a.in.Namespace, a.in.Name)
	if kind, ok := a.ownSourceKind(); ok {
		source = fluxSourceOf(string(kind), sync.Namespace, sync.Name)
	}
	ref := ks.Spec.SourceRef
	if ref.Namespace == "" {
		ref.Namespace = ks.Namespace
	}
	facts := SyncFacts{Labels: ks.Labels, Path: ks.Spec.Path, Source: fluxSourceOf(ref.Kind, ref.Namespace, ref.Name)}
	if ok, why := DecideOwnSync(ownSyncOf(src, repoPath, source), facts); !ok {
		return foreignSync("Kustomization", sync, why), nil
	}
	return health.FluxKustomization(ctx, ks, commit, anc)
}

func (a *fluxApplier) Gone(ctx context.Context, sync scribev1.ObjectIdentity) (bool, error) {
	found, err := getSync(ctx, a.client, "Kustomization", sync, &kustomizev1.Kustomization{})
	return !found && err == nil, err
}

// argoApplier: an Application per custom resource, in the custom
// resource's namespace, syncs and applies its directory of in.RepoURL at
// in.Revision; the root Application in.Namespace/in.Name (in Argo CD's
// namespace) applies the sync files, which hold those Applications and
// their AppProjects.
type argoApplier struct {
	client client.Client
	in     render.Applier
}

func (a *argoApplier) Kind() scribev1.ApplierKind  { return scribev1.ApplierArgoCD }
func (a *argoApplier) RenderInput() render.Applier { return a.in }

// Nudge asks Argo CD for a normal refresh of the custom resource's
// Application, and of the root Application when the commit changed the
// sync file (or the custom resource's Application does not exist yet):
// the root one creates, changes or prunes it.
func (a *argoApplier) Nudge(ctx context.Context, sync scribev1.ObjectIdentity, syncChanged bool) error {
	app := application()
	app.SetNamespace(sync.Namespace)
	app.SetName(sync.Name)
	err := annotate(ctx, a.client, app, ArgoRefreshAnnotation, "normal")
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return err
	}
	if !syncChanged && !missing {
		return nil
	}
	root := application()
	root.SetNamespace(a.in.Namespace)
	root.SetName(a.in.Name)
	return annotate(ctx, a.client, root, ArgoRefreshAnnotation, "normal")
}

func (a *argoApplier) Applied(ctx context.Context, sync, src scribev1.ObjectIdentity, repoPath, commit string, anc health.Ancestry) (health.Verdict, error) {
	app := application()
	found, err := getSync(ctx, a.client, "Application", sync, app)
	if !found {
		return notObserved("Application", sync, err)
	}
	repoURL, _, _ := unstructured.NestedString(app.Object, "spec", "source", "repoURL")
	revision, _, _ := unstructured.NestedString(app.Object, "spec", "source", "targetRevision")
	dir, _, _ := unstructured.NestedString(app.Object, "spec", "source", "path")
	facts := SyncFacts{Labels: app.GetLabels(), Path: dir, Source: argoSourceOf(repoURL, revision)}
	if ok, why := DecideOwnSync(ownSyncOf(src, repoPath, argoSourceOf(a.in.RepoURL, a.in.Revision)), facts); !ok {
		return foreignSync("Application", sync, why), nil
	}
	v, err := health.ArgoApplication(ctx, app, commit, anc)
	if err == nil && v.State == health.Pending && v.Reason == health.ReasonProgressing {
		// Argo CD synced our commit and computed health after that sync
		// (the checks before health in ArgoApplication), and says
		// Progressing: applied, not healthy yet. The verdict stays
		// Pending, so a step is not promoted before Argo CD says Healthy,
		// but the reason tells the Workload's rollout that the commit is
		// applied (as Flux's Ready sync Kustomization, wait: false,
		// does): its analysis runs, and a canary that never becomes
		// available is rolled back instead of waiting for Argo CD's
		// progress deadline.
		v.Reason = health.ReasonSyncedProgressing
		v.Message = "synced; Argo CD reports the Application Progressing"
	}
	return v, err
}

func (a *argoApplier) Gone(ctx context.Context, sync scribev1.ObjectIdentity) (bool, error) {
	found, err := getSync(ctx, a.client, "Application", sync, application())
	return !found && err == nil, err
}

func application() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(argoApplicationGVK())
	return u
}

// getSync reads the sync object, of kind, into obj. found is false when it
// does not exist (err nil) or could not be read (err set).
func getSync(ctx context.Context, c client.Client, kind string, sync scribev1.ObjectIdentity, obj client.Object) (found bool, err error) {
	if err := c.Get(ctx, types.NamespacedName{Namespace: sync.Namespace, Name: sync.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get %s %s/%s: %w", kind, sync.Namespace, sync.Name, err)
	}
	return true, nil
}

// notObserved is the verdict on a sync object the applier has not created
// yet; after a failed read (err set) there is no verdict.
func notObserved(kind string, sync scribev1.ObjectIdentity, err error) (health.Verdict, error) {
	if err != nil {
		return health.Verdict{}, err
	}
	return health.Verdict{State: health.Pending, Reason: "NotObserved", Message: fmt.Sprintf("%s %s/%s does not exist yet", kind, sync.Namespace, sync.Name)}, nil
}

// foreignSync is the verdict on an object under the sync object's name
// that is not the custom resource's own (DecideOwnSync says why).
func foreignSync(kind string, sync scribev1.ObjectIdentity, why string) health.Verdict {
	return health.Verdict{State: health.Pending, Reason: ReasonForeignSyncObject, Subject: subjectOf(scribev1.ObjectIdentity{Kind: kind, Namespace: sync.Namespace, Name: sync.Name}),
		Message: fmt.Sprintf("%s %s/%s is no evidence: %s", kind, sync.Namespace, sync.Name, why)}
}

// annotate merge-patches one annotation onto u (which names the object).
func annotate(ctx context.Context, c client.Client, u *unstructured.Unstructured, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("annotate %s %s/%s with %s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), key, err)
	}
	return nil
}
