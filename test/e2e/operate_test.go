package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// TestLoopOperateARolloutWithTheCLI operates a canary by hand with the
// real `scribe` command, as a person would, on the real node through the
// real applier: a step with `pause: {}` is held until `scribe promote`,
// `scribe abort` commits a rollback that says who and why, and `scribe
// retry` starts the version again; `scribe get --watch` follows it all
// from a watch.
func TestLoopOperateARolloutWithTheCLI(t *testing.T) {
	t.Parallel()
	appliers(t, func(t *testing.T, applier scribev1.ApplierKind) {
		ns := "operate"
		skipWithoutLoop(t)
		s := StartOpts(t, StackOptions{Applier: applier, RealNode: true})
		if err := s.Node.PushDemoApp(context.Background(), s.logf, "example/web", "1", "2", "3"); err != nil {
			t.Fatalf("the demo app's image: %v", err)
		}
		// A Flux notification-controller's event endpoint and Slack's API,
		// played on the bridge where Scribe's pod reaches them, each
		// speaking its real wire format.
		rx := startNotificationReceivers(t, s)
		s.InstallScribe(t, InstallOptions{Values: []string{"eventsAddr=" + rx.fluxURL}})
		notificationsConfig(t, s, rx.slackURL)
		newNamespaceAndRepository(t, s, ns)
		ctx := context.Background()
		cli := scribeCLI(t)
		scribe := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(cli, append(args, "--kubeconfig", s.Kubeconfig, "-n", ns)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("scribe %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		w := canaryWorkload(ns)
		w.Annotations = map[string]string{"notifications.argoproj.io/subscribe.on-rolled-back.slack": "deploys"}
		// 10 % and 50 %, each held until promoted.
		w.Spec.Rollout.Steps[0].Pause = &scribev1.RolloutPause{}
		w.Spec.Rollout.Steps[1].Pause = &scribev1.RolloutPause{}
		get := createHealthy(t, s, w)
		watched := watchCLI(t, cli, "get", "workload", "web", "--watch", "--kubeconfig", s.Kubeconfig, "-n", ns)

		held := func(step string) func() (bool, string) {
			return func() (bool, string) {
				got := get()
				r := routeWeights(ctx, s, ns, "web")
				return r == step && reason(got, scribev1.ReconcilingCondition) == "AwaitingPromotion", "route " + r + "; " + describe(got)
			}
		}
		updateWorkload(t, s, ns, func(w *scribev1.Workload) { w.Spec.Versions = append(w.Spec.Versions, webV2()) })
		poll(t, 3*time.Minute, "step 1 applied and held until promoted", held("web-v1=90,web-v2=10"))
		// Held, not timed: the loop polls health every second, so five
		// seconds are five chances to move on, and none is taken.
		time.Sleep(5 * time.Second)
		if ok, why := held("web-v1=90,web-v2=10")(); !ok {
			t.Fatalf("the held step moved without a promotion: %s", why)
		}

		scribe("promote", "workload", "web")
		poll(t, 3*time.Minute, "step 2 applied after scribe promote, and held", held("web-v1=50,web-v2=50"))

		scribe("abort", "workload", "web", "--reason", "p99 latency doubled")
		poll(t, 3*time.Minute, "the abort committed and applied", func() (bool, string) {
			got := get()
			if got.Status.Phase != scribev1.WorkloadRolledBack || got.Status.Revision == "" {
				return false, describe(got)
			}
			applied, err := s.AppliedRevision(ctx, "workload", ns, "web")
			if err != nil {
				return false, err.Error()
			}
			r := routeWeights(ctx, s, ns, "web")
			return applied == got.Status.Revision && r == "web-v1=100,web-v2=0", "applied " + applied + ", route " + r + "; " + describe(got)
		})
		got := get()
		if h := got.Status.History; len(h) == 0 || h[0].Outcome != scribev1.OutcomeAborted || h[0].Version != "v2" || !strings.Contains(h[0].Message, "p99 latency doubled") {
			t.Errorf("status.history does not record the abort: %+v", h)
		}
		msg := commitMessage(t, s, got.Status.Revision)
		if !strings.Contains(msg, "aborted by ") || !strings.Contains(msg, "p99 latency doubled") {
			t.Errorf("the rollback's commit message does not say who aborted and why:\n%s", msg)
		}

		rx.expectRollback(t, s, applier, ns, "p99 latency doubled")

		scribe("retry", "workload", "web")
		poll(t, 3*time.Minute, "v2 rolled out again after scribe retry, held at step 1", held("web-v1=90,web-v2=10"))

		out := watched()
		for _, want := range []string{"held until promoted", "RolledBack", "Aborted at step 2"} {
			if !strings.Contains(out, want) {
				t.Errorf("scribe get --watch never showed %q:\n%s", want, out)
			}
		}
		t.Logf("the last frames of scribe get --watch:\n%s", lastFrames(out, 2))
	})
}

// reason is the reason of w's condition typ, or "".
func reason(w *scribev1.Workload, typ string) string {
	for _, c := range w.Status.Conditions {
		if c.Type == typ {
			return c.Reason
		}
	}
	return ""
}

// commitMessage is the message of commit rev in the loop's repository.
func commitMessage(t *testing.T, s *Stack, rev string) string {
	t.Helper()
	work := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", s.RepoURL, work)
	return publishtest.Git(t, work, "log", "-1", "--format=%B", rev)
}

// scribeCLI builds the scribe command from this checkout, as a user
// installs it (go build; named as kubectl's plugin, the same binary).
func scribeCLI(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubectl-scribe")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/scribe")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the scribe command: %v\n%s", err, out)
	}
	return path
}

// watchCLI starts the scribe command (a --watch) and returns a function
// that stops it and returns what it printed.
func watchCLI(t *testing.T, path string, args ...string) func() string {
	t.Helper()
	var out syncBuffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return out.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// syncBuffer is a bytes.Buffer written by a child process's output
// copiers and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// lastFrames is the last n frames of a --watch output (frames start with
// their "Workload:" line).
func lastFrames(out string, n int) string {
	i := len(out)
	for ; n > 0 && i > 0; n-- {
		i = strings.LastIndex(out[:i], "Workload:")
		if i < 0 {
			return out
		}
	}
	return out[i:]
}

// receivers are a played notification-controller and Slack API.
type receivers struct {
	fluxURL, slackURL string
	flux              chan eventv1.Event
	slack             chan url.Values
}

// startNotificationReceivers serves, on an address Scribe's pod reaches,
// notification-controller's event endpoint (a POST of an event/v1beta1
// Event) and Slack's chat.postMessage (a form, answered as Slack does).
func startNotificationReceivers(t *testing.T, s *Stack) *receivers {
	t.Helper()
	rx := &receivers{flux: make(chan eventv1.Event, 256), slack: make(chan url.Values, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("/events/", func(w http.ResponseWriter, r *http.Request) {
		var ev eventv1.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case rx.flux <- ev:
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("/slack/api/chat.postMessage", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		select {
		case rx.slack <- r.PostForm:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true, "channel": "C1", "ts": "1.1"}`)
	})
	addr, err := s.servedAddr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	rx.fluxURL, rx.slackURL = "http://"+addr+"/events/", "http://"+addr+"/slack/api/"
	return rx
}

// notificationsConfig writes the notifications engine's ConfigMap and
// Secret, as an Argo CD user writes argocd-notifications-cm, in Scribe's
// namespace: a Slack service at slackURL, and, as the platform allows a
// tenant's subscriptions, the channel deploys for every namespace.
func notificationsConfig(t *testing.T, s *Stack, slackURL string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.NotificationsConfigMap, Namespace: ScribeNamespace},
			Data: map[string]string{"service.slack": "token: $slack-token\napiURL: " + slackURL + "\n", controller.RecipientsKey: "\"*\": [slack:deploys]\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: controller.NotificationsSecret, Namespace: ScribeNamespace},
			Data: map[string][]byte{"slack-token": []byte("xoxb-e2e")}},
	} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// expectRollback waits for the rollback of web in ns to reach both
// receivers: an error event, and a Slack message to the channel its
// annotation subscribes. Under Flux the event must be one a Flux Alert
// selects (alertSelectsWorkload); under Argo CD, which Flux's Alerts do
// not cover, it is about the Workload itself.
func (rx *receivers) expectRollback(t *testing.T, s *Stack, applier scribev1.ApplierKind, ns, why string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	var seen []string
	for found := false; !found; {
		select {
		case ev := <-rx.flux:
			seen = append(seen, ev.Severity+" "+ev.Reason+" "+ev.InvolvedObject.Kind)
			if ev.Reason != "RolledBack" || ev.Severity != eventv1.EventSeverityError || !strings.Contains(ev.Message, why) {
				continue
			}
			o := ev.InvolvedObject
			if applier == scribev1.ApplierFlux {
				found = alertSelectsWorkload(t, s, o, ns, "web")
			} else {
				found = o.Kind == scribev1.WorkloadKind && o.Namespace == ns && o.Name == "web"
			}
		case <-deadline:
			t.Fatalf("no RolledBack event a Flux Alert selects reached the notification-controller receiver; it got %v", seen)
		}
	}
	select {
	case form := <-rx.slack:
		if form.Get("channel") != "deploys" || !strings.Contains(form.Get("text"), "rolled back") {
			t.Errorf("Slack got channel %q, text %q", form.Get("channel"), form.Get("text"))
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no Slack message for the rollback")
	}
}

// alertSelectsWorkload does what notification-controller does for the
// Alert the README shows (eventSources: kind Kustomization, name '*',
// matchLabels scribe.dev/kind Workload, scribe.dev/name NAME): the
// involved object's kind is one an Alert can name, and the object, read
// from the API server, carries the labels.
func alertSelectsWorkload(t *testing.T, s *Stack, o corev1.ObjectReference, ns, name string) bool {
	t.Helper()
	// The kinds a Flux Alert's spec.eventSources[].kind accepts (an enum in
	// notification-controller's CRD).
	fluxAlertKinds := []string{"Bucket", "GitRepository", "Kustomization", "HelmRelease", "HelmChart", "HelmRepository",
		"ImageRepository", "ImagePolicy", "ImageUpdateAutomation", "OCIRepository"}
	if !slices.Contains(fluxAlertKinds, o.Kind) {
		t.Errorf("an event about %s %s/%s: no Flux Alert can select the kind %s", o.Kind, o.Namespace, o.Name, o.Kind)
		return false
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o.APIVersion)
	u.SetKind(o.Kind)
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u); err != nil {
		t.Errorf("the event's involved object: %v", err)
		return false
	}
	l := u.GetLabels()
	return l["scribe.dev/kind"] == scribev1.WorkloadKind && l["scribe.dev/namespace"] == ns && l["scribe.dev/name"] == name
}
