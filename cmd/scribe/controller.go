package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/egress"
	"github.com/scribe-gitops/scribe/internal/publish/gitsink"
)

// Environment variables read by scribe controller.
const (
	envLogLevel     = "LOG_LEVEL"
	envOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
)

// controllerFlags are the flags of scribe controller.
type controllerFlags struct {
	metricsAddr             string
	metricsSecure           bool
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	concurrent              int
	maxRenders              int
	commitInterval          time.Duration
	watchNamespaces         []string
	watchLabelSelector      string
	dataDir                 string
	pollInterval            time.Duration
	watchedPollInterval     time.Duration
	noCrossNamespaceRefs    bool
	applierNamespaces       []string
	gcpProject              string
	kubeconfig              string
	kubeAPIQPS              float32
	kubeAPIBurst            int
	eventsAddr              string
	testkubeAPI             string
	notificationsNamespace  string
	egressAllowPrivate      bool
	egressAllowLoopback     bool
	egressAllowCIDRs        []string
	egressUseProxy          bool
	// log holds --log-encoding and --log-level, the flags of Flux's
	// controllers (fluxcd/pkg/runtime/logger).
	log logger.Options
}

func (f *controllerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address the metrics endpoint binds to; 0 disables it")
	fl.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS (self-signed certificate) to callers authenticated and authorized by the API server; false serves plain HTTP to anyone, for local use")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address /healthz and /readyz bind to; 0 disables them")
	fl.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "address Go's profiler (/debug/pprof/) binds to, e.g. 127.0.0.1:6060; 0 (the default) disables it. It has no authentication: never bind it where tenants reach")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "hold a Lease so only one of several replicas reconciles")
	fl.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace in a cluster)")
	fl.StringVar(&f.leaderElectionID, "leader-election-id", "scribe-controller.scribe.dev", "name of the leader-election Lease")
	fl.IntVar(&f.concurrent, "concurrent", controller.DefaultConcurrency, "custom resources of each kind reconciled at once (a reconcile mostly waits; renders are bounded by --max-renders)")
	fl.IntVar(&f.maxRenders, "max-renders", 0, "renders that run at once, across every kind (default GOMAXPROCS, at least 2): what bounds the controller's CPU and memory; a large Experiment's render holds at most all but one, and namespaces take turns")
	fl.DurationVar(&f.commitInterval, "commit-interval", gitsink.DefaultCommitInterval, "minimum time between the starts of two commits to one branch; changes that arrive meanwhile go into the next commit (a change to an idle branch commits at once); 0 disables the pacing")
	fl.StringSliceVar(&f.watchNamespaces, "watch-namespaces", nil, "comma-separated namespaces to watch (default all); when set, it must include the applier's namespace (flux-system or argocd)")
	fl.StringVar(&f.watchLabelSelector, "watch-label-selector", "", "reconcile only custom resources matching this label selector, to shard across instances (e.g. "+controller.ShardLabel+"=shard1)")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory of the Git caches (default ${XDG_CACHE_HOME:-$HOME/.cache}/scribe/controller)")
	fl.StringSliceVar(&f.applierNamespaces, "applier-namespaces", controller.DefaultApplierNamespaces(), "namespaces where the Repositories of namespaces that no TenantPolicy selects may put their sync objects (a TenantPolicy's spec.applier.namespaces replaces it for the namespaces it selects)")
	fl.BoolVar(&f.noCrossNamespaceRefs, "no-cross-namespace-refs", false, "refuse a Repository's spec.catalog that names a Flux source in another namespace (multi-tenancy, as in Flux)")
	fl.DurationVar(&f.pollInterval, "poll-interval", 2*time.Second, "how often health is re-read while waiting for the applier")
	fl.DurationVar(&f.watchedPollInterval, "watched-poll-interval", controller.DefaultWatchedPoll, "how often a Workload's commit is re-read while it waits on an applier whose objects are watched (their changes start a reconcile at once; at least --poll-interval)")
	registerGCPProject(fl, &f.gcpProject)
	fl.StringVar(&f.testkubeAPI, "testkube-api-url", controller.DefaultTestkubeAPIURL, "address of Testkube's agent API, where the runs an agent evaluation's TestTrigger starts are read (GET <url>/v1/test-workflows/<name>/executions)")
	fl.Float32Var(&f.kubeAPIQPS, "kube-api-qps", controller.DefaultKubeAPIQPS, "client-side limit of queries per second to the API server; unset, there is none when the API server has priority and fairness (the default), and 50 otherwise")
	fl.IntVar(&f.kubeAPIBurst, "kube-api-burst", controller.DefaultKubeAPIBurst, "burst of queries to the API server above --kube-api-qps; unset, none with priority and fairness, 300 otherwise")
	// The flags of Flux's controllers; LOG_LEVEL stays, below --log-level.
	f.log.BindFlags(fl)
	fl.Lookup("log-encoding").Usage = "log encoding: json (one JSON object a line) or console (human-readable)"
	fl.Lookup("log-level").Usage = "log level: trace, debug, info, warn or error; when not given, $" + envLogLevel + ", if set, decides"
	registerKubeconfig(fl, &f.kubeconfig, "$KUBECONFIG, then the in-cluster config, then ~/.kube/config")
	fl.StringVar(&f.eventsAddr, "events-addr", "", "also POST every Event to this address, Flux's notification-controller (http://notification-controller.flux-system.svc.cluster.local./), as Flux's controllers do")
	fl.BoolVar(&f.egressAllowPrivate, "egress-allow-private", false, "let the URLs tenants write (analysis checks, rollout webhooks, a Repository's registry and forge API) reach private addresses: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, fc00::/7, where a cluster's Services usually are. Link-local addresses and cloud metadata services are never reached")
	fl.BoolVar(&f.egressAllowLoopback, "egress-allow-loopback", false, "let the URLs tenants write reach loopback addresses (127.0.0.0/8, ::1): the controller itself, or the machine it runs on outside a cluster")
	fl.StringSliceVar(&f.egressAllowCIDRs, "egress-allow-cidrs", nil, "comma-separated CIDRs or addresses the URLs tenants write may reach even without --egress-allow-private or --egress-allow-loopback, e.g. 10.96.0.0/12 for the Service network only (never opens link-local or metadata addresses)")
	fl.BoolVar(&f.egressUseProxy, "egress-use-proxy", false, "send the requests to the URLs tenants write through the proxy of HTTP_PROXY, HTTPS_PROXY and NO_PROXY (their host is resolved and checked here first); by default they go direct")
	fl.StringVar(&f.notificationsNamespace, "notifications-namespace", "", "namespace of the notifications engine's ConfigMap "+controller.NotificationsConfigMap+" and Secret "+controller.NotificationsSecret+" (default: the pod's namespace in a cluster; none outside: no notifications)")
}

func newControllerCmd() *cobra.Command {
	var f controllerFlags
	cmd := &cobra.Command{
		Use:   "controller [flags]",
		Short: "Run the Scribe controller manager",
		Long: `Controller reconciles Scribe's custom resources until it receives SIGINT
or SIGTERM, then shuts down gracefully:
  Repository    checks it can push to its Git repository or OCI registry
  Workload      renders and commits each rollout step, analyses, rolls back
  Pipeline      runs a stage Workload per stage and promotes across them
  Experiment    renders and commits its clusters, components and workflow
A TenantPolicy (cluster-scoped) is read, not reconciled: it bounds the
Repositories of the namespaces it selects.

Scribe renders into Git or OCI and writes in the cluster only its own
resources' status and finalizers, Events, its Lease and the
reconcile-request annotation on Flux sources and Argo CD Applications.

--watch-namespaces restricts every watch, including those of the applier's
objects: list the applier's namespace (flux-system or argocd) too, or
health is never read back, and Testkube's (testkube) for agent evaluations,
or their executions are only polled, not watched. --watch-label-selector shards custom resources
across instances like Flux does, for example
  --watch-label-selector ` + controller.ShardLabel + `=shard1

Notifications: --events-addr also posts every Event to Flux's
notification-controller, for its Alerts and Providers; the ConfigMap
` + controller.NotificationsConfigMap + ` and Secret ` + controller.NotificationsSecret + ` in
--notifications-namespace configure Argo's notifications engine (services,
triggers, templates), and notifications.argoproj.io/subscribe.* annotations
on a Workload, Experiment or Pipeline subscribe to its triggers.

Egress: the URLs tenants write (analysis checks, rollout webhooks, a
Repository's registry and forge API) reach public addresses only, never
a link-local address or a cloud metadata service, and go direct, not
through HTTP_PROXY. --egress-allow-private, --egress-allow-loopback and
--egress-allow-cidrs let them reach the cluster's private ranges (the
Helm chart allows private ranges), --egress-use-proxy sends them through
the environment's proxy.

Environment:
  LOG_LEVEL                    trace, debug, info (default), warn or error;
                               --log-level, when given, wins
  OTEL_EXPORTER_OTLP_ENDPOINT  export traces over OTLP/gRPC (also _TRACES_ENDPOINT,
                               _HEADERS, _INSECURE; OTEL_SERVICE_NAME)
  KUBECONFIG                   used when --kubeconfig is not given

Endpoints: metrics on --metrics-bind-address (HTTPS with a self-signed
certificate and Kubernetes authentication and authorization unless
--metrics-secure=false); /healthz and /readyz on
--health-probe-bind-address. Exit code 0 after a clean shutdown, 2 on bad
flags or any error.`,
		Example: `  # Outside the cluster, against the current kubeconfig context
  scribe controller --metrics-secure=false --metrics-bind-address :8080

  # One of two shards, watching only its tenants' namespaces and the applier's
  scribe controller --leader-elect --watch-label-selector ` + controller.ShardLabel + `=shard1 \
    --watch-namespaces team-a,team-b,flux-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runController(cmd, &f)
		},
	}
	f.register(cmd)
	return cmd
}

// logLevel is the zap level of --log-level when it was given (flagSet),
// else of the LOG_LEVEL environment variable env, else info. The names are
// Flux's (trace, debug, info, error) and warn.
func logLevel(flag string, flagSet bool, env string) (zapcore.Level, error) {
	s, from := env, envLogLevel
	if flagSet {
		s, from = flag, "--log-level"
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "info":
		return zapcore.InfoLevel, nil
	case "trace":
		// logr's V(2), as Flux's logger has it.
		return zapcore.DebugLevel - 1, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("%s=%q: want trace, debug, info, warn or error", from, s)
}

// check validates the flags before anything touches the cluster.
func (f *controllerFlags) check() error {
	var problems []string
	if f.concurrent < 1 {
		problems = append(problems, fmt.Sprintf("--concurrent must be at least 1, not %d", f.concurrent))
	}
	if f.maxRenders < 0 {
		problems = append(problems, fmt.Sprintf("--max-renders must not be negative, not %d", f.maxRenders))
	}
	if f.commitInterval < 0 {
		problems = append(problems, fmt.Sprintf("--commit-interval must not be negative, not %s", f.commitInterval))
	}
	if f.kubeAPIQPS <= 0 {
		problems = append(problems, fmt.Sprintf("--kube-api-qps must be positive, not %v", f.kubeAPIQPS))
	}
	if f.kubeAPIBurst <= 0 {
		problems = append(problems, fmt.Sprintf("--kube-api-burst must be positive, not %d", f.kubeAPIBurst))
	}
	if f.watchedPollInterval <= 0 {
		problems = append(problems, fmt.Sprintf("--watched-poll-interval must be positive, not %s", f.watchedPollInterval))
	}
	if f.pollInterval <= 0 {
		problems = append(problems, fmt.Sprintf("--poll-interval must be positive, not %s", f.pollInterval))
	}
	if f.watchLabelSelector != "" {
		if _, err := labels.Parse(f.watchLabelSelector); err != nil {
			problems = append(problems, fmt.Sprintf("--watch-label-selector %q: %v", f.watchLabelSelector, err))
		}
	}
	for _, ns := range f.watchNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; ")))
		}
	}
	if f.eventsAddr != "" {
		if u, err := url.Parse(f.eventsAddr); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("--events-addr %q is not an http(s) URL, such as http://notification-controller.flux-system.svc.cluster.local./", f.eventsAddr))
		}
	}
	if ns := f.notificationsNamespace; ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("--notifications-namespace: %q is not a namespace name: %s", ns, strings.Join(errs, "; ")))
		}
	}
	if _, err := egress.ParsePrefixes("--egress-allow-cidrs", f.egressAllowCIDRs); err != nil {
		problems = append(problems, err.Error())
	}
	if f.log.LogEncoding != "json" && f.log.LogEncoding != "console" {
		problems = append(problems, fmt.Sprintf("--log-encoding must be json or console, not %q", f.log.LogEncoding))
	}
	if f.leaderElectionID == "" && f.leaderElect {
		problems = append(problems, "--leader-election-id must not be empty with --leader-elect")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

func runController(cmd *cobra.Command, f *controllerFlags) error {
	bad := func(err error) error { return &codeError{code: exitError, err: err} }
	level, err := logLevel(f.log.LogLevel, cmd.Flags().Changed("log-level"), os.Getenv(envLogLevel))
	if err != nil {
		return bad(err)
	}
	if err := f.check(); err != nil {
		return bad(err)
	}
	if f.dataDir == "" {
		cacheDir, err := os.UserCacheDir()
		if err != nil {
			return bad(fmt.Errorf("--data-dir: no default (%w); set it", err))
		}
		f.dataDir = filepath.Join(cacheDir, "scribe", "controller")
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return bad(fmt.Errorf("--data-dir: %w", err))
	}

	log := newLogger(cmd.ErrOrStderr(), level, f.log.LogEncoding)
	// The manager and its controllers log through log (Options.Logger),
	// not only through controller-runtime's global logger: SetLogger
	// takes effect only once per process, and not at all once
	// controller-runtime has given up waiting for it (30 s after the
	// process started, when something logged through it first).
	ctrl.SetLogger(log)
	tracing, stopTracing, err := setupTracing(cmd.Context())
	if err != nil {
		return bad(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
		defer cancel()
		if err := stopTracing(ctx); err != nil {
			log.Error(err, "flush traces")
		}
	}()

	cfg, err := f.restConfig()
	if err != nil {
		return bad(err)
	}
	explicit := cmd.Flags().Changed("kube-api-qps") || cmd.Flags().Changed("kube-api-burst")
	log.Info(controller.ClientRateLimit(cmd.Context(), cfg, f.kubeAPIQPS, f.kubeAPIBurst, explicit))
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                        log,
		Scheme:                        scheme,
		Metrics:                       f.metricsOptions(),
		HealthProbeBindAddress:        f.probeAddr,
		PprofBindAddress:              f.pprofAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              f.leaderElectionID,
		LeaderElectionNamespace:       f.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // run returns as soon as the manager stops
		Cache:                         controller.CacheOptions(f.namespaces()),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	m, err := controller.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	policy, err := f.egressPolicy()
	if err != nil {
		return bad(err)
	}
	if _, err := controller.Setup(mgr, controller.Options{
		Metrics:         m,
		DataDir:         f.dataDir,
		Concurrency:     f.concurrent,
		MaxRenders:      f.maxRenders,
		CommitInterval:  f.optionsCommitInterval(),
		LabelSelector:   f.watchLabelSelector,
		WatchNamespaces: f.watchNamespaces,
		Poll:            f.pollInterval,
		WatchedPoll:     f.watchedPollInterval,
		GCPProject:      f.gcpProject,
		Egress:          policy,
		TestkubeAPI:     f.testkubeAPI,
		TestkubeClient:  controller.NewTestkubeHTTPClient(),
		// As in kustomize-controller: artifact URLs name source-controller's
		// in-cluster Service; outside the cluster this host replaces it.
		SourceHost:           os.Getenv("SOURCE_CONTROLLER_LOCALHOST"),
		NoCrossNamespaceRefs: f.noCrossNamespaceRefs,
		ApplierNamespaces:    f.applierNamespaces,
		Notify: controller.NotifyOptions{
			EventsAddr: f.eventsAddr,
			Namespace:  f.notificationsNamespaceOrPod(),
			Registerer: ctrlmetrics.Registry,
		},
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("ready check: %w", err)
	}
	log.Info("starting manager", "namespaces", f.watchNamespaces, "labelSelector", f.watchLabelSelector,
		"concurrent", f.concurrent, "dataDir", f.dataDir, "leaderElect", f.leaderElect, "tracing", tracing)
	if err := mgr.Start(cmd.Context()); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	log.Info("manager stopped")
	return nil
}

// newLogger logs at level and above to w: JSON lines, or with encoding
// "console" tab-separated human-readable lines. (logger.NewLogger, Flux's,
// writes only to os.Stderr and knows no warn level.)
func newLogger(w io.Writer, level zapcore.Level, encoding string) logr.Logger {
	opts := []zap.Opts{zap.WriteTo(w), zap.UseDevMode(false), zap.Level(level)}
	if encoding == "console" {
		opts = append(opts, zap.ConsoleEncoder())
	}
	return zap.New(opts...)
}

// restConfig loads --kubeconfig, or else what ctrl.GetConfig finds
// ($KUBECONFIG, in-cluster, ~/.kube/config).
func (f *controllerFlags) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if f.kubeconfig == "" {
		if cfg, err = ctrl.GetConfig(); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
	} else {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
	}
	return cfg, nil
}

// metricsOptions serves metrics over HTTPS behind Kubernetes authn/authz
// with a self-signed certificate, as kubebuilder scaffolds, or plain HTTP.
// HTTP/2 is disabled (CVE-2023-44487, CVE-2023-39325).
func (f *controllerFlags) metricsOptions() metricsserver.Options {
	o := metricsserver.Options{
		BindAddress:   f.metricsAddr,
		SecureServing: f.metricsSecure,
		TLSOpts:       []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if f.metricsSecure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// podNamespaceFile holds the pod's namespace in a cluster.
const podNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// notificationsNamespaceOrPod is --notifications-namespace, or the pod's
// namespace, or none outside a cluster.
func (f *controllerFlags) notificationsNamespaceOrPod() string {
	if f.notificationsNamespace != "" {
		return f.notificationsNamespace
	}
	b, err := os.ReadFile(podNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// optionsCommitInterval is --commit-interval as controller.Options takes
// it: there 0 means the default and a negative value no pacing.
func (f *controllerFlags) optionsCommitInterval() time.Duration {
	if f.commitInterval == 0 {
		return -1
	}
	return f.commitInterval
}

// namespaces is the cache's DefaultNamespaces: nil watches all.
func (f *controllerFlags) namespaces() map[string]cache.Config {
	if len(f.watchNamespaces) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(f.watchNamespaces))
	for _, ns := range f.watchNamespaces {
		out[ns] = cache.Config{}
	}
	return out
}

// egressPolicy is where the URLs tenants write may lead, from the
// --egress-* flags: by default public addresses only.
func (f *controllerFlags) egressPolicy() (egress.Policy, error) {
	cidrs, err := egress.ParsePrefixes("--egress-allow-cidrs", f.egressAllowCIDRs)
	if err != nil {
		return egress.Policy{}, err
	}
	return egress.Policy{AllowPrivate: f.egressAllowPrivate, AllowLoopback: f.egressAllowLoopback, AllowCIDRs: cidrs, UseProxy: f.egressUseProxy}, nil
}
