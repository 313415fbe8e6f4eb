package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/credurl"
)

// RepositoryReconciler checks that Scribe can write to each Repository and
// reports it in Ready; the other reconcilers wait for that.
type RepositoryReconciler struct {
	Publisher *Publisher
	// Interval between access checks of a Ready repository.
	Interval time.Duration
	// RetryInterval after a failed check.
	RetryInterval time.Duration
}

// +kubebuilder:rbac:groups=scribe.dev,resources=repositories,verbs=get;list;watch
// +kubebuilder:rbac:groups=scribe.dev,resources=repositories/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// SetupWithManager registers the reconciler.
func (r *RepositoryReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, pred predicate.Predicate) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&scribev1.Repository{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, pred)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	// A TenantPolicy changes what every Repository of the namespaces it
	// selected or selects may do, and a relabelled Namespace may move
	// under another policy: each is checked again at once.
	b = watchTenancy(b, r.Publisher.Client, func() client.ObjectList { return &scribev1.RepositoryList{} }, pred)
	return b.Complete(r)
}

// Reconcile checks access: a ref listing over the push service for Git (which
// proves URL, network and credentials), a registry ping for OCI.
func (r *RepositoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return lifecycle[*scribev1.Repository]{kind: scribev1.RepositoryKind, reconcile: r.reconcile}.
		run(ctx, r.Publisher.Client, req, &scribev1.Repository{})
}

// reconcile checks the Repository and loads its catalog. A failed check is
// recorded by the shared table (Ready=False, Stalled when only a change
// helps) but retried at RetryInterval whatever its reason: the check is a
// poll of the remote, and Workloads and Experiments wait for it.
func (r *RepositoryReconciler) reconcile(ctx context.Context, repo *scribev1.Repository, _ *statusPatcher) (ctrl.Result, error) {
	repo.Status.ObservedGeneration = repo.Generation
	now := metav1.Now()
	repo.Status.LastAccessCheck = &now
	head, t, err := r.check(ctx, repo)
	if err != nil {
		log.FromContext(ctx).Info("access check failed", "error", err.Error())
		classify(err).mark(repo, err)
		conditions.Delete(repo, scribev1.ReconcilingCondition)
		return ctrl.Result{RequeueAfter: r.RetryInterval}, nil
	}
	interval := r.Interval
	if !r.catalog(ctx, t) {
		// A Flux source usually has its artifact within seconds.
		interval = min(interval, catalogRetryInterval)
	}
	if head != "" {
		repo.Status.Revision = head
	}
	conditions.MarkTrue(repo, scribev1.ReadyCondition, "Accessible", "%s", accessMessage(repo, head))
	conditions.Delete(repo, scribev1.ReconcilingCondition)
	conditions.Delete(repo, scribev1.StalledCondition)
	return ctrl.Result{RequeueAfter: interval}, nil
}

func (r *RepositoryReconciler) check(ctx context.Context, repo *scribev1.Repository) (string, *Target, error) {
	t, err := r.Publisher.Resolver.For(ctx, repo)
	if err != nil {
		return "", nil, err
	}
	if t.GitOpts != nil {
		head, err := r.Publisher.Git.CheckAccess(ctx, *t.GitOpts)
		return head, t, err
	}
	if err := t.OCI.Ping(ctx); err != nil {
		return "", nil, err
	}
	return "", t, nil
}

// catalog loads the Repository's user catalog (spec.catalog), as
// Experiments will, and reports it in CatalogReady and status.catalog. It
// returns false when the catalog could not be loaded (retried sooner).
func (r *RepositoryReconciler) catalog(ctx context.Context, t *Target) bool {
	repo := t.Repo
	if repo.Spec.Catalog == nil {
		repo.Status.Catalog = nil
		conditions.Delete(repo, scribev1.CatalogReadyCondition)
		return true
	}
	_, st, err := r.Publisher.catalogFor(ctx, t)
	if err != nil {
		conditions.MarkFalse(repo, scribev1.CatalogReadyCondition, reasonOf(err), "%s", err.Error())
		return false
	}
	repo.Status.Catalog = st
	conditions.MarkTrue(repo, scribev1.CatalogReadyCondition, ReasonSucceeded, "catalog at %s: %d components", st.Revision, len(st.Entries))
	return true
}

func accessMessage(repo *scribev1.Repository, head string) string {
	if repo.Spec.Git != nil {
		branch := repo.Spec.Git.Branch
		if branch == "" {
			branch = "main"
		}
		if head == "" {
			return fmt.Sprintf("can push to %s; branch %s does not exist yet", credurl.Redact(repo.Spec.Git.URL), branch)
		}
		return fmt.Sprintf("can push to %s; branch %s at %s", credurl.Redact(repo.Spec.Git.URL), branch, head)
	}
	return fmt.Sprintf("can push to %s", credurl.Redact(repo.Spec.OCI.URL))
}

// catalogRetryInterval is how soon a catalog that could not be loaded is
// tried again.
const catalogRetryInterval = 5 * time.Second
