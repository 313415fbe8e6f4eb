package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func TestTriggerForNamesArgoStyleTriggers(t *testing.T) {
	for _, tc := range []struct{ kind, reason, want string }{
		{scribev1.WorkloadKind, "RolledBack", "on-rolled-back"},
		{scribev1.WorkloadKind, "RolloutStarted", "on-rollout-started"},
		{scribev1.WorkloadKind, "AwaitingPromotion", "on-awaiting-promotion"},
		{scribev1.WorkloadKind, "Aborted", "on-aborted"},
		{scribev1.WorkloadKind, "HTTPCheckFailed", "on-http-check-failed"},
		{scribev1.WorkloadKind, "Step2Healthy", "on-step2-healthy"},
		{scribev1.ExperimentKind, "Running", "on-experiment-running"},
		{scribev1.PipelineKind, "Verified", "on-pipeline-verified"},
		{scribev1.PipelineKind, "StageRolledBack", "on-pipeline-stage-rolled-back"},
		{"", "Promoted", "on-promoted"},
		{scribev1.WorkloadKind, "", ""},
	} {
		if got := triggerFor(tc.kind, tc.reason); got != tc.want {
			t.Errorf("triggerFor(%q, %q) = %q, want %q", tc.kind, tc.reason, got, tc.want)
		}
	}
}

func TestDefaultNotificationsConfigParsesAndCoversTheIssuesTriggers(t *testing.T) {
	eng, err := newEngine(&corev1.ConfigMap{}, &corev1.Secret{})
	if err != nil {
		t.Fatalf("the default triggers and templates do not parse: %v", err)
	}
	for _, want := range []string{
		"on-rollout-started", "on-step-advanced", "on-check-failed", "on-rolled-back", "on-awaiting-promotion",
		"on-pull-request-opened", "on-aborted", "on-promoted", "on-experiment-running", "on-experiment-failed",
		"on-pipeline-verified",
	} {
		if _, ok := eng.GetConfig().Triggers[want]; !ok {
			t.Errorf("no default trigger %s", want)
		}
		if _, ok := eng.GetConfig().Templates[strings.TrimPrefix(want, "on-")]; !ok {
			t.Errorf("no default template %s", strings.TrimPrefix(want, "on-"))
		}
	}
}

// rolledBackWorkload is a Workload as the reconciler holds it (no
// TypeMeta, as the cache returns typed objects) after a rollback.
func rolledBackWorkload(annotations map[string]string) *scribev1.Workload {
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "apps", Generation: 7, UID: "uid-1", Annotations: annotations,
	}}
	w.Status.Revision = "4f2c0ffee4f2c0ffee4f2c0ffee4f2c0ffee4f2c"
	return w
}

// startNotifier runs n until the test ends.
func startNotifier(t *testing.T, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// await returns what ch receives, failing the test if nothing comes.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s received", what)
	}
	var zero T
	return zero
}

// TestNotifierForwardsEventsToFluxNotificationController: a rollback
// reaches the API server's recorder and is POSTed to the events address
// as the eventv1.Event notification-controller decodes, with severity
// error (a Normal Event: info), the Workload as involved object and the
// revision and token under the scribe.dev/ prefix that
// notification-controller keeps.
func TestNotifierForwardsEventsToFluxNotificationController(t *testing.T) {
	received := make(chan eventv1.Event, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev eventv1.Event
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || dec.Decode(&ev) != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		received <- ev
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := newFluxSink(scheme, logr.Discard(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	k8s := events.NewFakeRecorder(10)
	n, err := newNotifier(k8s, scheme, logr.Discard(), nil, fs)
	if err != nil {
		t.Fatal(err)
	}
	startNotifier(t, n)

	w := rolledBackWorkload(map[string]string{eventv1.Group + "/team": "payments", "unrelated": "x"})
	n.Eventf(w, nil, corev1.EventTypeWarning, "CheckFailed", "CheckFailed", "round 2 of 2 failed")
	if ev := await(t, received, "CheckFailed event"); ev.Reason != "CheckFailed" || ev.Metadata["scribe.dev/revision"] != w.Status.Revision {
		t.Errorf("CheckFailed event: reason %q metadata %v", ev.Reason, ev.Metadata)
	}
	await(t, k8s.Events, "Kubernetes Event of CheckFailed")
	// A rollback is a new intent: status has no revision until it is
	// committed, and the event names the revision rolled back from.
	w.Status.Revision = ""
	n.Eventf(w, nil, corev1.EventTypeWarning, "RolledBack", "RolledBack", "%s failed its checks; back to %s", "v2", "v1")
	w.Status.Revision = "changed after the event"

	if got := await(t, k8s.Events, "Kubernetes Event"); !strings.Contains(got, "Warning RolledBack v2 failed its checks; back to v1") {
		t.Errorf("Kubernetes Event %q", got)
	}
	ev := await(t, received, "event at the events address")
	ref := ev.InvolvedObject
	if ref.Kind != scribev1.WorkloadKind || ref.APIVersion != scribev1.GroupVersion.String() || ref.Namespace != "apps" || ref.Name != "web" || ref.UID != "uid-1" {
		t.Errorf("involvedObject %+v", ref)
	}
	if ev.Severity != eventv1.EventSeverityError || ev.Reason != "RolledBack" || ev.Message != "v2 failed its checks; back to v1" {
		t.Errorf("severity %q reason %q message %q", ev.Severity, ev.Reason, ev.Message)
	}
	if ev.ReportingController != "scribe-controller" || ev.ReportingInstance == "" {
		t.Errorf("reporting controller %q instance %q", ev.ReportingController, ev.ReportingInstance)
	}
	want := map[string]string{
		"scribe.dev/revision":          "4f2c0ffee4f2c0ffee4f2c0ffee4f2c0ffee4f2c",
		"scribe.dev/token":             "7",
		"event.toolkit.fluxcd.io/team": "payments",
	}
	if fmt.Sprint(ev.Metadata) != fmt.Sprint(want) {
		t.Errorf("metadata %v, want %v", ev.Metadata, want)
	}

	n.Eventf(w, nil, corev1.EventTypeNormal, "Promoted", "Promoted", "v2 is stable")
	if ev := await(t, received, "second event"); ev.Severity != eventv1.EventSeverityInfo || ev.Reason != "Promoted" {
		t.Errorf("a Normal Event: severity %q reason %q", ev.Severity, ev.Reason)
	}

	// Delivered by a Flux Kustomization, the Workload's events are that
	// Kustomization's, the kind an Alert's eventSources can name.
	w.Status.Revision = "4f2c0ffee4f2c0ffee4f2c0ffee4f2c0ffee4f2c"
	w.Status.GeneratedResources = &scribev1.GeneratedResources{Path: "apps/web", Objects: []scribev1.ObjectIdentity{
		{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "flux-system", Name: "scribe-apps-web"},
	}}
	n.Eventf(w, nil, corev1.EventTypeWarning, "RolledBack", "RolledBack", "v3 failed its checks; back to v2")
	ev = await(t, received, "event of the delivering Kustomization")
	if ref := ev.InvolvedObject; ref.Kind != "Kustomization" || ref.APIVersion != "kustomize.toolkit.fluxcd.io/v1" || ref.Namespace != "flux-system" || ref.Name != "scribe-apps-web" {
		t.Errorf("involvedObject %+v, want the Kustomization flux-system/scribe-apps-web", ref)
	}
	want = map[string]string{
		"kustomize.toolkit.fluxcd.io/revision": "4f2c0ffee4f2c0ffee4f2c0ffee4f2c0ffee4f2c",
		"kustomize.toolkit.fluxcd.io/token":    "7",
		"kustomize.toolkit.fluxcd.io/object":   "Workload/apps/web",
		"event.toolkit.fluxcd.io/team":         "payments",
	}
	if fmt.Sprint(ev.Metadata) != fmt.Sprint(want) {
		t.Errorf("metadata %v, want %v", ev.Metadata, want)
	}
}

// TestFluxEventsAreAboutAnObjectAnAlertCanSelect: a Flux Alert's
// eventSources name only Flux's kinds, so an object a Flux Kustomization
// delivers is reported as that Kustomization; anything else as itself.
func TestFluxEventsAreAboutAnObjectAnAlertCanSelect(t *testing.T) {
	ks := scribev1.ObjectIdentity{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "flux-system", Name: "scribe-x"}
	app := scribev1.ObjectIdentity{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: "argocd", Name: "scribe-x"}
	gen := func(ids ...scribev1.ObjectIdentity) *scribev1.GeneratedResources {
		return &scribev1.GeneratedResources{Path: "x", Objects: ids}
	}
	workload := func(g *scribev1.GeneratedResources) *scribev1.Workload {
		w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}}
		w.Status.GeneratedResources = g
		return w
	}
	exp := &scribev1.Experiment{ObjectMeta: metav1.ObjectMeta{Name: "tutorial", Namespace: "team-a"}}
	exp.Status.GeneratedResources = gen(ks)
	pipe := &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "release", Namespace: "apps"}}
	for _, tc := range []struct {
		name              string
		obj               runtime.Object
		kind, ns, nm      string
		group, objectMeta string
	}{
		{"a Workload Flux delivers is its Kustomization", workload(gen(ks)), "Kustomization", "flux-system", "scribe-x", "kustomize.toolkit.fluxcd.io", "Workload/apps/web"},
		{"an Experiment Flux delivers is its Kustomization", exp, "Kustomization", "flux-system", "scribe-x", "kustomize.toolkit.fluxcd.io", "Experiment/team-a/tutorial"},
		{"a Workload Argo CD delivers is itself", workload(gen(app)), "Workload", "apps", "web", "scribe.dev", ""},
		{"a Workload not rendered yet is itself", workload(nil), "Workload", "apps", "web", "scribe.dev", ""},
		{"a Workload whose first object is no Kustomization is itself", workload(gen(scribev1.ObjectIdentity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "x"}, ks)), "Workload", "apps", "web", "scribe.dev", ""},
		{"a Pipeline is itself", pipe, "Pipeline", "apps", "release", "scribe.dev", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, group, object := fluxInvolved(tc.obj)
			o, ok := got.(client.Object)
			if !ok {
				t.Fatalf("%T is not an object", got)
			}
			kind := o.GetObjectKind().GroupVersionKind().Kind
			if kind == "" {
				kind = reflect.TypeOf(got).Elem().Name()
			}
			if kind != tc.kind || o.GetNamespace() != tc.ns || o.GetName() != tc.nm || group != tc.group || object != tc.objectMeta {
				t.Errorf("got %s %s/%s group %q object %q", kind, o.GetNamespace(), o.GetName(), group, object)
			}
		})
	}
}

// TestFluxSinkReportsARefusedEvent: an events address that answers an
// error is a failed send (logged and counted), not a silent one.
func TestFluxSinkReportsARefusedEvent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := newFluxSink(scheme, logr.Discard(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNotifier(nil, scheme, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	no, err := n.notification(rolledBackWorkload(nil), corev1.EventTypeWarning, "RolledBack", "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.send(context.Background(), no); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("send to an endpoint answering 400: %v", err)
	}
}

type capturedRequest struct {
	path, method, auth, contentType string
	header                          http.Header
	body                            []byte
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, chan capturedRequest) {
	t.Helper()
	reqs := make(chan capturedRequest, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reqs <- capturedRequest{path: r.URL.Path, method: r.Method, auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"), header: r.Header.Clone(), body: body}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

// engineFixture is a ConfigMap and Secret as Argo users write them, with
// Slack, Teams and a generic webhook pointing at local receivers.
func engineFixture(slackURL, teamsURL, hookURL string) (*corev1.ConfigMap, *corev1.Secret) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: NotificationsConfigMap, Namespace: "scribe-system"},
		Data: map[string]string{
			"service.slack":              "token: $slack-token\napiURL: " + slackURL + "/api/\n",
			"service.teams":              "recipientUrls:\n  ops: $teams-ops-url\n",
			"service.webhook.deploy-log": "url: " + hookURL + "\nheaders:\n- name: Content-Type\n  value: application/json\n- name: Authorization\n  value: Bearer $hook-token\n",
			"template.rolled-back-hook": `webhook:
  deploy-log:
    method: POST
    path: /events
    body: |
      {"workload": "{{.workload.metadata.namespace}}/{{.workload.metadata.name}}", "reason": "{{.event.reason}}", "revision": "{{.event.revision}}"}
`,
			"trigger.on-rolled-back": "- when: \"true\"\n  send: [rolled-back, rolled-back-hook]\n",
			RecipientsKey:            "apps: [slack:deploys, slack:releases, teams:ops, deploy-log]\n",
		},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: NotificationsSecret, Namespace: "scribe-system"},
		Data: map[string][]byte{
			"slack-token":   []byte("xoxb-not-a-real-token"),
			"teams-ops-url": []byte(teamsURL + "/webhookb2/secret-path-token"),
			"hook-token":    []byte("hook-secret-token"),
		},
	}
	return cm, secret
}

func newTestEngineSink(t *testing.T, cm *corev1.ConfigMap, secret *corev1.Secret) *engineSink {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return newEngineSink(fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm, secret).Build(), "scribe-system")
}

// TestNotifierSendsRollbackToSlackTeamsAndWebhook: a Workload subscribed
// by annotations to on-rolled-back gets, for its RolledBack Event, a
// Slack chat.postMessage to its channel, a Teams MessageCard to its
// incoming webhook, and the generic webhook's templated body, each in
// the service's request format.
func TestNotifierSendsRollbackToSlackTeamsAndWebhook(t *testing.T) {
	slack, slackReqs := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true, "channel": "C024BE91L", "ts": "1700000000.000100"}`)
	})
	teams, teamsReqs := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "1") })
	hook, hookReqs := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	cm, secret := engineFixture(slack.URL, teams.URL, hook.URL)

	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNotifier(events.NewFakeRecorder(10), scheme, logr.Discard(), nil, newTestEngineSink(t, cm, secret))
	if err != nil {
		t.Fatal(err)
	}
	startNotifier(t, n)
	w := rolledBackWorkload(map[string]string{
		"notifications.argoproj.io/subscribe.on-rolled-back.slack":      "deploys",
		"notifications.argoproj.io/subscribe.on-rolled-back.teams":      "ops",
		"notifications.argoproj.io/subscribe.on-rolled-back.deploy-log": "",
		"notifications.argoproj.io/subscribe.on-promoted.slack":         "releases",
		"unrelated": "x",
	})
	n.Eventf(w, nil, corev1.EventTypeWarning, "RolledBack", "RolledBack", "v2 failed its checks; back to v1")

	s := await(t, slackReqs, "Slack request")
	form, err := url.ParseQuery(string(s.body))
	if err != nil {
		t.Fatal(err)
	}
	// chat.postMessage as slack-go posts it: a form with the bot token.
	if s.method != http.MethodPost || s.path != "/api/chat.postMessage" || s.contentType != "application/x-www-form-urlencoded" ||
		form.Get("token") != "xoxb-not-a-real-token" || form.Get("channel") != "deploys" {
		t.Errorf("Slack: %s %s %s token %q channel %q", s.method, s.path, s.contentType, form.Get("token"), form.Get("channel"))
	}
	if text := form.Get("text"); text != "Workload apps/web rolled back: v2 failed its checks; back to v1" {
		t.Errorf("Slack text %q", text)
	}
	var attachments []map[string]any
	if err := json.Unmarshal([]byte(form.Get("attachments")), &attachments); err != nil || len(attachments) != 1 || attachments[0]["color"] != "#E96D76" {
		t.Errorf("Slack attachments %s: %v", form.Get("attachments"), err)
	}

	tr := await(t, teamsReqs, "Teams request")
	var card map[string]any
	if err := json.Unmarshal(tr.body, &card); err != nil {
		t.Fatalf("Teams body %s: %v", tr.body, err)
	}
	// A MessageCard as notifications-engine v0.5.0 writes it (its context
	// key lacks the "@" of the connector format; Teams ignores it).
	if tr.method != http.MethodPost || tr.path != "/webhookb2/secret-path-token" || card["@type"] != "MessageCard" ||
		card["title"] != "Workload apps/web rolled back" || card["themeColor"] != "#E96D76" ||
		card["text"] != "Workload apps/web rolled back: v2 failed its checks; back to v1" {
		t.Errorf("Teams: %s %s %s", tr.method, tr.path, tr.body)
	}

	h := await(t, hookReqs, "webhook request")
	var body map[string]string
	if err := json.Unmarshal(h.body, &body); err != nil {
		t.Fatalf("webhook body %s: %v", h.body, err)
	}
	if h.method != http.MethodPost || h.path != "/events" || h.auth != "Bearer hook-secret-token" || h.contentType != "application/json" {
		t.Errorf("webhook: %s %s auth %q type %q", h.method, h.path, h.auth, h.contentType)
	}
	if body["workload"] != "apps/web" || body["reason"] != "RolledBack" || body["revision"] != w.Status.Revision {
		t.Errorf("webhook body %v", body)
	}

	// A trigger nobody subscribed to (on-step-advanced) sends nothing; the
	// one subscribed next does, to its own channel.
	n.Eventf(w, nil, corev1.EventTypeNormal, "StepAdvanced", "StepAdvanced", "step 2 of 3")
	n.Eventf(w, nil, corev1.EventTypeNormal, "Promoted", "Promoted", "v2 is stable")
	s = await(t, slackReqs, "Slack request for on-promoted")
	form, _ = url.ParseQuery(string(s.body))
	if form.Get("channel") != "releases" || form.Get("text") != "Workload apps/web rollout completed: v2 is stable" {
		t.Errorf("after StepAdvanced and Promoted, Slack got channel %q text %q", form.Get("channel"), form.Get("text"))
	}
}

// TestEngineSinkKeepsSecretsOutOfErrors: a Teams webhook that fails
// yields an error (logged by the Notifier) without the webhook's secret
// URL path or any value of the Secret.
func TestEngineSinkKeepsSecretsOutOfErrors(t *testing.T) {
	refuse := func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "token xoxb-not-a-real-token and hook-secret-token rejected", http.StatusForbidden)
	}
	teams, _ := newReceiver(t, refuse)
	hook, _ := newReceiver(t, refuse)
	cm, secret := engineFixture("http://127.0.0.1:1", teams.URL, hook.URL)
	s := newTestEngineSink(t, cm, secret)
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNotifier(nil, scheme, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	no, err := n.notification(rolledBackWorkload(map[string]string{
		"notifications.argoproj.io/subscribe.on-rolled-back.teams":      "ops",
		"notifications.argoproj.io/subscribe.on-rolled-back.deploy-log": "",
	}), corev1.EventTypeWarning, "RolledBack", "m")
	if err != nil {
		t.Fatal(err)
	}
	err = s.send(context.Background(), no)
	if err == nil {
		t.Fatal("a Teams webhook and a webhook that refuse: no error")
	}
	for _, secretValue := range []string{"xoxb-not-a-real-token", "secret-path-token", "hook-secret-token"} {
		if strings.Contains(err.Error(), secretValue) {
			t.Errorf("error names a secret %q: %v", secretValue, err)
		}
	}
}

func TestRedactHidesSecretsAndURLPaths(t *testing.T) {
	err := redact(errors.New(`Post "https://hooks.slack.com/services/T0/B0/XYZ?x=1": dial tcp: refused; token s3cr3t-value`), []string{"s3cr3t-value"})
	if got, want := err.Error(), `Post "https://hooks.slack.com/…": dial tcp: refused; token *****`; got != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
}

// blockingSink never returns a send until released.
type blockingSink struct{ release chan struct{} }

func (b blockingSink) name() string { return "blocking" }
func (b blockingSink) send(ctx context.Context, _ notification) error {
	<-b.release
	return nil
}

// TestNotifierNeverWaitsForASink: a receiver that hangs costs the
// reconciler nothing: Eventf records every Kubernetes Event and returns;
// a notification whose queue is full is dropped and counted; hung sends
// are abandoned at their deadline, counted as failed, and past
// maxHungSends the sink is skipped.
func TestNotifierNeverWaitsForASink(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	k8s := events.NewFakeRecorder(notifyQueueLen + 10)
	reg := prometheus.NewRegistry()
	n, err := newNotifier(k8s, scheme, logr.Discard(), reg, blockingSink{release})
	if err != nil {
		t.Fatal(err)
	}
	n.timeout = time.Millisecond
	w := rolledBackWorkload(nil)
	// Not started: the queue fills, then drops.
	for i := range notifyQueueLen + 3 {
		n.Eventf(w, nil, corev1.EventTypeNormal, "StepAdvanced", "StepAdvanced", "step %d", i)
	}
	if got := len(k8s.Events); got != notifyQueueLen+3 {
		t.Errorf("%d Kubernetes Events recorded, want %d", got, notifyQueueLen+3)
	}
	if got := testutil.ToFloat64(n.results.WithLabelValues("blocking", "dropped")); got != 3 {
		t.Errorf("%v dropped, want 3", got)
	}
	startNotifier(t, n)
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(n.results.WithLabelValues("blocking", "failed")) < notifyQueueLen && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(n.results.WithLabelValues("blocking", "failed")); got != notifyQueueLen {
		t.Fatalf("%v sends failed, want every one of %d", got, notifyQueueLen)
	}
	if got := testutil.ToFloat64(n.results.WithLabelValues("blocking", "sent")); got != 0 {
		t.Errorf("%v sent by a sink that never returns", got)
	}
}
