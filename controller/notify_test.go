package controller_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// TestWorkloadRollbackIsNotifiedToFluxAndSlack: with --events-addr and
// the notifications ConfigMap set, a Workload's rollback, decided by the
// real controller, reaches a local notification-controller event
// endpoint (the eventv1.Event of a Warning about the Kustomization that
// delivers the Workload, with the revision rolled back from) and a local
// Slack API (chat.postMessage to the channel the Workload's annotation
// subscribes to on-rolled-back).
func TestWorkloadRollbackIsNotifiedToFluxAndSlack(t *testing.T) {
	flux := make(chan eventv1.Event, 64)
	fluxSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev eventv1.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case flux <- ev:
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer fluxSrv.Close()
	slack := make(chan url.Values, 8)
	slackSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if form, err := url.ParseQuery(string(body)); err == nil && r.URL.Path == "/api/chat.postMessage" {
			select {
			case slack <- form:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true, "channel": "C1", "ts": "1.1"}`)
	}))
	defer slackSrv.Close()

	f := newFixture(t)
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.NotificationsConfigMap, Namespace: f.ns},
			Data: map[string]string{"service.slack": "token: $slack-token\napiURL: " + slackSrv.URL + "/api/\n",
				controller.RecipientsKey: f.ns + ": [slack:deploys]\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: controller.NotificationsSecret, Namespace: f.ns},
			Data: map[string][]byte{"slack-token": []byte("xoxb-test")}},
	} {
		if err := f.e.c.Create(f.ctx(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.e.c.Create(f.ctx(), f.repo); err != nil {
		t.Fatal(err)
	}
	startControllerWith(t, f.e, f.ns, controller.Options{Poll: 150 * time.Millisecond, Concurrency: 2, CommitInterval: -1,
		Notify: controller.NotifyOptions{EventsAddr: fluxSrv.URL, Namespace: f.ns}})
	f.waitRepositoriesReady(t, []string{"default"})

	w := workload(f.ns, "v1")
	w.Annotations = map[string]string{"notifications.argoproj.io/subscribe.on-rolled-back.slack": "deploys"}
	f.deployStable(t, w)
	ks := kustomizationName("Workload", f.ns, "web")
	f.addVersion(t, "v2", func(w *scribev1.Workload) {
		w.Spec.Rollout.Steps[0].Pause = scribev1.PauseFor(time.Hour)
		w.Spec.Rollout.Analysis = &scribev1.Analysis{
			Interval: &metav1.Duration{Duration: 200 * time.Millisecond}, Threshold: 2,
			Checks: []scribev1.Check{{Name: "restarts", Type: "restarts", Max: "1"}},
		}
	})
	f.warmUp(t, "v2")
	w = f.waitWorkload(t, "step 1 committed", func(w *scribev1.Workload) bool {
		return w.Status.CanaryVersion == "v2" && w.Status.Step == 0 && w.Status.Revision != "" && canaryWeight(w) > 0
	})
	step1 := w.Status.Revision
	f.deploymentReady(t, "web-v2", true)
	f.crashingPod(t, "web-v2")
	f.playFlux(t, ks, step1, true, "", "")
	f.waitWorkload(t, "rollback", func(w *scribev1.Workload) bool { return w.Status.Phase == scribev1.WorkloadRolledBack })

	var rolledBack *eventv1.Event
	var seen []string
	deadline := time.After(30 * time.Second)
	for rolledBack == nil {
		select {
		case ev := <-flux:
			seen = append(seen, ev.Severity+" "+ev.Reason)
			if ev.Reason == "RolledBack" {
				rolledBack = &ev
			}
		case <-deadline:
			t.Fatalf("no RolledBack event at the events address; received %v", seen)
		}
	}
	if !strings.Contains(strings.Join(seen, ","), "info RolloutStarted") {
		t.Errorf("the rollout's Normal events did not arrive as info before the rollback: %v", seen)
	}
	// The event is the delivering Kustomization's, the kind a Flux Alert
	// can select, and names the Workload.
	ref := rolledBack.InvolvedObject
	if ref.Kind != "Kustomization" || ref.APIVersion != "kustomize.toolkit.fluxcd.io/v1" || ref.Namespace != ks.Namespace || ref.Name != ks.Name {
		t.Errorf("involvedObject %+v, want the Kustomization %s", ref, ks)
	}
	if rolledBack.Severity != eventv1.EventSeverityError || !strings.Contains(rolledBack.Message, "rollback of v2") {
		t.Errorf("severity %q message %q", rolledBack.Severity, rolledBack.Message)
	}
	if got := rolledBack.Metadata["kustomize.toolkit.fluxcd.io/revision"]; got != step1 {
		t.Errorf("revision metadata %q, want the step rolled back from, %s", got, step1)
	}
	if got, want := rolledBack.Metadata["kustomize.toolkit.fluxcd.io/object"], "Workload/"+f.ns+"/web"; got != want {
		t.Errorf("object metadata %q, want %q", got, want)
	}

	select {
	case form := <-slack:
		if form.Get("channel") != "deploys" || form.Get("token") != "xoxb-test" || !strings.Contains(form.Get("text"), "Workload "+f.ns+"/web rolled back: rollback of v2") {
			t.Errorf("Slack got channel %q text %q", form.Get("channel"), form.Get("text"))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no Slack message for the rollback")
	}
}
