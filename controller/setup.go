package controller

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"time"

	"github.com/fluxcd/cli-utils/pkg/flowcontrol"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/egress"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
	"github.com/scribe-gitops/scribe/render"
)

// ShardLabel selects the objects one controller instance reconciles, as
// Flux shards: instances run with --watch-label-selector on this label.
const ShardLabel = "sharding.scribe.dev/key"

// NewScheme registers every kind the controller reads.
func NewScheme() (*kruntime.Scheme, error) {
	s := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{
		clientgoscheme.AddToScheme, scribev1.AddToScheme, kustomizev1.AddToScheme, sourcev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// Options configure the reconcilers.
type Options struct {
	// DataDir holds the Git caches.
	DataDir string
	// Concurrency is each reconciler's MaxConcurrentReconciles (default
	// DefaultConcurrency). A worker spends most of a reconcile waiting (for
	// the API server, for the commit that carries its change); renders,
	// the CPU and memory of a reconcile, are bounded apart by MaxRenders.
	Concurrency int
	// MaxRenders bounds the renders that run at once across every
	// reconciler (default: GOMAXPROCS, at least 2). A freed slot goes to
	// the namespaces with a render waiting in turn, and a large
	// Experiment's render holds at most MaxRenders-1 of them (see
	// renderSlots).
	MaxRenders int
	// CommitInterval paces the commits to one branch (see
	// gitsink.Git.CommitInterval): 0 means gitsink.DefaultCommitInterval,
	// a negative value no pacing.
	CommitInterval time.Duration
	// WatchNamespaces are the namespaces the manager's cache holds
	// (CacheOptions); empty means all. A Repository whose applier lives
	// elsewhere is Stalled with NamespaceNotWatched.
	WatchNamespaces []string
	// LabelSelector restricts the Workloads, Experiments and Repositories
	// reconciled (sharding); empty means all.
	LabelSelector string
	// Poll is how often health is re-read while waiting for the applier.
	Poll time.Duration
	// WatchedPoll is how often a Workload's commit is re-read while it
	// waits on an applier whose objects are watched (default
	// DefaultWatchedPoll; never shorter than Poll): the watch starts the
	// reconcile, the poll is a safety net.
	WatchedPoll time.Duration
	// RepositoryInterval between access checks of a Ready Repository.
	RepositoryInterval time.Duration
	// GCPProject for gke and talos clusters.
	GCPProject string
	// HTTPClient for analysis queries and rollout webhooks; nil is
	// NewAnalysisHTTPClient(Egress).
	HTTPClient *http.Client
	// Egress is where the URLs tenants write may lead: analysis checks,
	// webhooks, a Repository's registry and forge API. The zero Policy
	// reaches public addresses only (no loopback, no private range).
	Egress egress.Policy
	// TestkubeAPI is the address of Testkube's agent API, where the runs
	// an agent evaluation's TestTrigger starts are read (default
	// DefaultTestkubeAPIURL); TestkubeClient reads it (default
	// NewTestkubeHTTPClient).
	TestkubeAPI    string
	TestkubeClient *http.Client
	// Metrics receives render, publish and read-back measurements; nil
	// records nothing.
	Metrics *Metrics
	// NoNudge stops Scribe from asking the applier to reconcile after a
	// push (the applier then notices at its poll interval). For measuring.
	NoNudge bool
	// SourceHost replaces the host of Flux artifact URLs when user catalogs
	// are downloaded, like kustomize-controller's SOURCE_CONTROLLER_LOCALHOST
	// (for a controller running outside the cluster).
	SourceHost string
	// NoCrossNamespaceRefs: a Repository's spec.catalog may only name a
	// Flux source in the Repository's own namespace (multi-tenancy, as
	// Flux's --no-cross-namespace-refs).
	NoCrossNamespaceRefs bool
	// ApplierNamespaces are where the Repositories of namespaces that no
	// TenantPolicy selects may put their sync objects; nil means
	// DefaultApplierNamespaces.
	ApplierNamespaces []string
	// Notify: where Events go besides the API server.
	Notify NotifyOptions
}

// DefaultWatchedPoll is Options.WatchedPoll's default.
const DefaultWatchedPoll = 30 * time.Second

// DefaultKubeAPIQPS and DefaultKubeAPIBurst bound the controller's requests
// to the API server (client-side) when the API server has no priority and
// fairness (see ClientRateLimit): Flux's controllers' defaults. A new custom
// resource costs two writes (its finalizer, its status), so at these values
// a burst of 1000 is paced by the client to about 35 s.
const (
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 300
)

// ClientRateLimit sets cfg's client-side rate limit and says which one it
// chose. Explicit values (the --kube-api-qps and --kube-api-burst flags)
// are kept. Otherwise, when the API server has API Priority and Fairness
// enabled (the default since Kubernetes 1.20, GA in 1.29), the client has
// no limiter and the server paces it, as Flux's controllers and
// controller-runtime do by default, on SIG API Machinery's advice; without
// it, or when that cannot be told, DefaultKubeAPIQPS and
// DefaultKubeAPIBurst.
func ClientRateLimit(ctx context.Context, cfg *rest.Config, qps float32, burst int, explicit bool) string {
	if explicit {
		cfg.QPS, cfg.Burst = qps, burst
		return fmt.Sprintf("client-side limit %v QPS, burst %d (as set)", qps, burst)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	enabled, err := flowcontrol.IsEnabled(ctx, cfg)
	if err == nil && enabled {
		// A negative QPS: no client-side rate limiter.
		cfg.QPS, cfg.Burst = -1, -1
		return "no client-side limit: the API server's priority and fairness paces requests"
	}
	cfg.QPS, cfg.Burst = DefaultKubeAPIQPS, DefaultKubeAPIBurst
	why := "the API server has no priority and fairness"
	if err != nil {
		why = fmt.Sprintf("priority and fairness not detected: %v", err)
	}
	return fmt.Sprintf("client-side limit %d QPS, burst %d (%s)", DefaultKubeAPIQPS, DefaultKubeAPIBurst, why)
}

// DefaultConcurrency is each reconciler's default number of workers. It
// is high because a worker is cheap while it waits: a burst of custom
// resources needs many of them waiting on one commit to become a few
// commits. What a reconcile costs (its render) is bounded by MaxRenders.
// Measured on two cores (BenchmarkControllerProcess1000Workloads), 1000
// Workloads created at once are all committed after 10.9 s in 11 commits
// with 100 workers, 8.4 s in 9 with 200 and 7.7 s in 8 with 300, the
// process peaking at 164, 179 and 182 MiB.
const DefaultConcurrency = 300

// Setup registers Scribe's reconcilers with mgr and returns the Publisher
// they share.
func Setup(mgr ctrl.Manager, opts Options) (*Publisher, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MaxRenders <= 0 {
		// At least two, so that a heavy render leaves one (renderSlots).
		opts.MaxRenders = max(2, runtime.GOMAXPROCS(0))
	}
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.WatchedPoll <= 0 {
		opts.WatchedPoll = DefaultWatchedPoll
	}
	opts.WatchedPoll = max(opts.WatchedPoll, opts.Poll)
	if opts.RepositoryInterval <= 0 {
		opts.RepositoryInterval = 5 * time.Minute
	}
	pred := predicate.Funcs{}
	var sel labels.Selector
	if opts.LabelSelector != "" {
		var err error
		if sel, err = labels.Parse(opts.LabelSelector); err != nil {
			return nil, fmt.Errorf("label selector %q: %w", opts.LabelSelector, err)
		}
	}
	engine, err := render.New()
	if err != nil {
		return nil, fmt.Errorf("load templates: %w", err)
	}
	git := gitsink.New(filepath.Join(opts.DataDir, "git"))
	switch {
	case opts.CommitInterval < 0:
		git.CommitInterval = 0
	case opts.CommitInterval > 0:
		git.CommitInterval = opts.CommitInterval
	}
	p := &Publisher{
		Client:     mgr.GetClient(),
		Reader:     mgr.GetAPIReader(),
		Resolver:   &Resolver{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Git: git, Watched: opts.WatchNamespaces, ApplierNamespaces: opts.ApplierNamespaces, Egress: opts.Egress},
		Git:        git,
		GCPProject: opts.GCPProject,
		Metrics:    opts.Metrics,
		NoNudge:    opts.NoNudge,

		NoCrossNamespaceRefs: opts.NoCrossNamespaceRefs,

		Engine:      engine,
		renderSlots: newRenderSlots(opts.MaxRenders),
	}
	p.catalogs.dir = filepath.Join(opts.DataDir, "catalog")
	p.catalogs.hostOverride = opts.SourceHost
	p.Git.OnConflict = opts.Metrics.IncPushConflict
	var shard predicate.Predicate = pred
	if sel != nil {
		shard = predicate.NewPredicateFuncs(func(o client.Object) bool { return sel.Matches(labels.Set(o.GetLabels())) })
	}
	if err := (&RepositoryReconciler{Publisher: p, Interval: opts.RepositoryInterval, RetryInterval: 30 * time.Second}).SetupWithManager(mgr, opts.Concurrency, shard); err != nil {
		return nil, fmt.Errorf("repository controller: %w", err)
	}
	events, err := setupNotifier(mgr, opts.Notify)
	if err != nil {
		return nil, fmt.Errorf("notifications: %w", err)
	}
	wr := &WorkloadReconciler{
		Publisher:   p,
		Events:      events,
		Checks:      &Checker{Client: mgr.GetClient(), HTTP: opts.HTTPClient, Egress: opts.Egress, Secrets: p.Resolver.Secret, Templates: mgr.GetAPIReader()},
		Poll:        opts.Poll,
		WatchedPoll: opts.WatchedPoll,
	}
	if err := wr.SetupWithManager(mgr, opts.Concurrency, shard); err != nil {
		return nil, fmt.Errorf("workload controller: %w", err)
	}
	pr := &PipelineReconciler{Client: mgr.GetClient(), Events: events, Metrics: opts.Metrics}
	if err := pr.SetupWithManager(mgr, opts.Concurrency, shard); err != nil {
		return nil, err
	}
	// Experiments.
	er := &ExperimentReconciler{Publisher: p, Events: events, Poll: opts.Poll, WatchedPoll: opts.WatchedPoll,
		TestkubeAPI: opts.TestkubeAPI, TestkubeClient: opts.TestkubeClient}
	if err := er.SetupWithManager(mgr, opts.Concurrency, shard); err != nil {
		return nil, fmt.Errorf("experiment controller: %w", err)
	}
	return p, nil
}

// CacheOptions are the manager's cache options Scribe needs: namespaces
// limits every informer to those namespaces (nil: all). Objects are cached
// without their managedFields, which Scribe never reads and which are
// often the larger part of an object; Deployments and Pods, which Scribe
// only reads for Workloads, are cached only when render labelled them
// (scribe.dev/workload), not every one of the cluster.
func CacheOptions(namespaces map[string]cache.Config) cache.Options {
	rendered := labels.NewSelector()
	if r, err := labels.NewRequirement(WorkloadLabel, selection.Exists, nil); err == nil {
		rendered = rendered.Add(*r)
	}
	return cache.Options{
		DefaultNamespaces: namespaces,
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: rendered},
			&corev1.Pod{}:        {Label: rendered},
		},
	}
}

// WorkloadLabel is the label render puts on a Workload's Deployments and
// their pods, valued with the Workload's name.
const WorkloadLabel = "scribe.dev/workload"
