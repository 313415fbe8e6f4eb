package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/argoproj/notifications-engine/pkg/services"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Tenant text, as each sink's escaper leaves it: every attack arrives
// inert, and ordinary text reads the same.
func TestNotifyEscapersNeutraliseTenantMarkup(t *testing.T) {
	for _, tc := range []struct {
		attack, in            string
		slack, lines, oneLine string
	}{
		{"Slack's channel-wide ping", "v2 <!channel> failed",
			"v2 &lt;!channel&gt; failed", "v2 ‹!channel› failed", "v2 ‹!channel› failed"},
		{"Slack's ping of the active", "<!here|here> look",
			"&lt;!here|here&gt; look", "‹!here|here› look", "‹!here|here› look"},
		{"a Slack link disguised as other words", "see <https://evil.example/x|the runbook>",
			"see &lt;https://evil.example/x|the runbook&gt;", "see ‹https://evil.example/x|the runbook›", "see ‹https://evil.example/x|the runbook›"},
		{"a user or role mention by id (Slack, Discord)", "<@U024BE7LH> <@&123>",
			"&lt;@U024BE7LH&gt; &lt;@&amp;123&gt;", "‹@U024BE7LH› ‹@&123›", "‹@U024BE7LH› ‹@&123›"},
		{"plain-text mentions (Mattermost, Discord, Rocket.Chat)", "@here @Channel @everyone @all",
			"@\u200bhere @\u200bChannel @\u200beveryone @\u200ball", "@\u200bhere @\u200bChannel @\u200beveryone @\u200ball", "@\u200bhere @\u200bChannel @\u200beveryone @\u200ball"},
		{"a markdown link disguised as other words", "[https://good.example](https://evil.example)",
			"[https://good.example]\u200b(https://evil.example)", "[https://good.example]\u200b(https://evil.example)", "[https://good.example]\u200b(https://evil.example)"},
		{"an entity written to be decoded into markup", "&lt;!channel&gt;",
			"&amp;lt;!channel&amp;gt;", "&lt;!channel&gt;", "&lt;!channel&gt;"},
		{"a forged second line", "v2 failed\r\n*Approved by the security team*",
			"v2 failed\n*Approved by the security team*", "v2 failed\n*Approved by the security team*", "v2 failed  *Approved by the security team*"},
		{"text shown in another order than it is read (bidi override)", "v2 \u202eexe.txt\u202c ok",
			"v2 exe.txt ok", "v2 exe.txt ok", "v2 exe.txt ok"},
		{"control characters (a terminal escape, a NUL, a bell)", "a\x1b[31mb\x00c\x07",
			"a[31mbc", "a[31mbc", "a[31mbc"},
		{"a line separator", "a\u2028b",
			"a\nb", "a\nb", "a b"},
		{"ordinary text and an email address are left alone", "rollback of v2: aborted by alice@example.com: p99 <= 0.05 & more",
			"rollback of v2: aborted by alice@example.com: p99 &lt;= 0.05 &amp; more",
			"rollback of v2: aborted by alice@example.com: p99 ‹= 0.05 & more",
			"rollback of v2: aborted by alice@example.com: p99 ‹= 0.05 & more"},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			for _, c := range []struct {
				service, want string
			}{
				{"slack", tc.slack}, {"teams", tc.slack},
				{"mattermost", tc.lines}, {"email", tc.lines},
				{"webhook", tc.oneLine}, {"flux", tc.oneLine}, {"opsgenie", tc.oneLine}, {"", tc.oneLine},
			} {
				if got := escaperFor(c.service)(tc.in); got != c.want {
					t.Errorf("%s: %q, want %q", c.service, got, c.want)
				}
			}
		})
	}
}

// escapeTree escapes every string of the template variables, not their
// keys nor their numbers, and leaves the original as it was.
func TestEscapeTreeEscapesEveryStringOnly(t *testing.T) {
	vars := map[string]any{"obj": map[string]any{"metadata": map[string]any{"annotations": map[string]any{"<k>": "<!here>"}},
		"spec": map[string]any{"versions": []any{map[string]any{"name": "<v2>"}}, "replicas": float64(3)}}}
	got := escapeTree(vars, escaperFor("slack")).(map[string]any)
	obj := got["obj"].(map[string]any)
	if a := obj["metadata"].(map[string]any)["annotations"].(map[string]any)["<k>"]; a != "&lt;!here&gt;" {
		t.Errorf("annotation %v", a)
	}
	spec := obj["spec"].(map[string]any)
	if n := spec["versions"].([]any)[0].(map[string]any)["name"]; n != "&lt;v2&gt;" || spec["replicas"] != float64(3) {
		t.Errorf("spec %v", spec)
	}
	if vars["obj"].(map[string]any)["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["name"] != "<v2>" {
		t.Error("the original variables were changed")
	}
}

// TestNotifierSendsTenantTextToSlackInert: a rollback whose message and
// version name carry Slack markup reaches Slack escaped, in the default
// template's text, while the trigger still fires on the real Event.
func TestNotifierSendsTenantTextToSlackInert(t *testing.T) {
	slack, slackReqs := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true, "channel": "C1", "ts": "1.1"}`)
	})
	cm, secret := engineFixture(slack.URL, "http://127.0.0.1:1", "http://127.0.0.1:1")
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNotifier(events.NewFakeRecorder(10), scheme, logr.Discard(), nil, newTestEngineSink(t, cm, secret))
	if err != nil {
		t.Fatal(err)
	}
	startNotifier(t, n)
	w := rolledBackWorkload(map[string]string{"notifications.argoproj.io/subscribe.on-rolled-back.slack": "deploys"})
	n.Eventf(w, nil, corev1.EventTypeWarning, "RolledBack", "RolledBack", "rollback of <!channel>: aborted by alice: see <https://evil.example|the runbook> @here")
	form, err := url.ParseQuery(string(await(t, slackReqs, "Slack request").body))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := form.Get("text"), "Workload apps/web rolled back: rollback of &lt;!channel&gt;: aborted by alice: see &lt;https://evil.example|the runbook&gt; @\u200bhere"; got != want {
		t.Errorf("Slack text\n%q, want\n%q", got, want)
	}
}

// TestEngineSinkSendsOnlyToRecipientsThePlatformAllows: a Workload's
// annotation that names a Slack channel the ConfigMap's scribe.recipients
// does not allow for its namespace sends nothing there (and says so); the
// channels it allows, and "*" entries, are sent to.
func TestEngineSinkSendsOnlyToRecipientsThePlatformAllows(t *testing.T) {
	slack, slackReqs := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true, "channel": "C1", "ts": "1.1"}`)
	})
	cm, secret := engineFixture(slack.URL, "http://127.0.0.1:1", "http://127.0.0.1:1")
	cm.Data[RecipientsKey] = "apps: [slack:deploys]\n\"*\": [slack:all-deploys]\nother: [slack:*]\n"
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
		"notifications.argoproj.io/subscribe.on-rolled-back.slack": "deploys;ceo-announcements;all-deploys",
	}), corev1.EventTypeWarning, "RolledBack", "m")
	if err != nil {
		t.Fatal(err)
	}
	err = s.send(context.Background(), no)
	if err == nil || !strings.Contains(err.Error(), "apps/web subscribes slack:ceo-announcements, which the ConfigMap's scribe.recipients does not allow for namespace apps") {
		t.Errorf("error %v", err)
	}
	var channels []string
	for range 2 {
		form, _ := url.ParseQuery(string(await(t, slackReqs, "Slack request").body))
		channels = append(channels, form.Get("channel"))
	}
	if strings.Join(channels, ",") != "deploys,all-deploys" {
		t.Errorf("sent to %v", channels)
	}
	select {
	case r := <-slackReqs:
		t.Errorf("also sent to %s", r.body)
	default:
	}
}

func TestRecipientsAllowWhatThePlatformListed(t *testing.T) {
	r, err := parseRecipients("team-a: [slack:team-a, 'deploy-log', teams:*]\n'*': [slack:deploys]\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns      string
		service string
		to      string
		want    bool
	}{
		{"team-a", "slack", "team-a", true},
		{"team-a", "slack", "team-b", false},
		{"team-b", "slack", "team-a", false},
		{"team-b", "slack", "deploys", true},
		{"team-a", "deploy-log", "", true},
		{"team-a", "deploy-log", "x", false},
		{"team-a", "teams", "anything", true},
		{"team-b", "teams", "anything", false},
	} {
		if got := r.allow(tc.ns, services.Destination{Service: tc.service, Recipient: tc.to}); got != tc.want {
			t.Errorf("%s to %s:%s: %v, want %v", tc.ns, tc.service, tc.to, got, tc.want)
		}
	}
	if none, err := parseRecipients(""); err != nil || none.allow("team-a", services.Destination{Service: "slack", Recipient: "x"}) {
		t.Errorf("no key: %v %v", none, err)
	}
	for _, bad := range []string{"team-a: slack:x", "team-a: [':x']", "[a]"} {
		if _, err := parseRecipients(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestFluxSinkPostsTenantTextInert: the message and the object's
// event.toolkit.fluxcd.io/ annotations reach notification-controller
// inert for whichever Provider it picks, on one line; the object the
// other sinks read keeps its annotations.
func TestFluxSinkPostsTenantTextInert(t *testing.T) {
	received := make(chan eventv1.Event, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev eventv1.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err == nil {
			received <- ev
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer hook.Close()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := newFluxSink(scheme, logr.Discard(), hook.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := newNotifier(nil, scheme, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := rolledBackWorkload(map[string]string{eventv1.Group + "/team": "<!channel> payments"})
	no, err := n.notification(w, corev1.EventTypeWarning, "RolledBack", "v2 <https://evil.example|ok>\n@everyone")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.send(context.Background(), no); err != nil {
		t.Fatal(err)
	}
	ev := await(t, received, "Flux event")
	if ev.Message != "v2 ‹https://evil.example|ok› @\u200beveryone" || ev.Metadata[eventv1.Group+"/team"] != "‹!channel› payments" {
		t.Errorf("message %q, metadata %v", ev.Message, ev.Metadata)
	}
	if got := no.obj.(*scribev1.Workload).Annotations[eventv1.Group+"/team"]; got != "<!channel> payments" {
		t.Errorf("the shared object's annotation became %q", got)
	}
}
