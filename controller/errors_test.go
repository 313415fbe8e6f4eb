package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/internal/publish"
	"github.com/scribe-gitops/scribe/render"
)

func publishErr(r publish.Reason) error {
	return &publish.Error{Reason: r, Op: "push to", URL: "https://git.example.com/team/gitops", Err: errors.New("boom")}
}

func tagged(reason string) error {
	return &reasonError{reason: reason, err: errors.New("boom")}
}

func TestClassifyMapsEachErrorToOneReasonRequeueAndStall(t *testing.T) {
	const (
		stalled = "stalled"
		waiting = "waiting"
		steady  = "steady"
		backoff = "backoff"
	)
	for _, tc := range []struct {
		name    string
		err     error
		reason  string
		outcome string
		requeue time.Duration
	}{
		// Only a change of the object, its Repository or a Secret helps.
		{"a render error stalls", fmt.Errorf("render: %w", &render.InputError{Object: "Workload/team/web"}), scribev1.RenderFailedReason, stalled, 30 * time.Second},
		{"a missing Repository stalls", tagged(ReasonRepositoryNotFound), ReasonRepositoryNotFound, stalled, 30 * time.Second},
		{"a remote without the repository stalls", publishErr(publish.ReasonNotFound), ReasonRepositoryNotFound, stalled, 30 * time.Second},
		{"an invalid change stalls", publishErr(publish.ReasonInvalid), string(publish.ReasonInvalid), stalled, 30 * time.Second},
		{"a missing Secret stalls", tagged(ReasonSecretNotFound), ReasonSecretNotFound, stalled, 30 * time.Second},
		{"an invalid catalog stalls", tagged(ReasonCatalogInvalid), ReasonCatalogInvalid, stalled, 30 * time.Second},
		{"an object another custom resource publishes stalls", publishErr(publish.ReasonObjectConflict), string(publish.ReasonObjectConflict), stalled, 30 * time.Second},
		{"a sync index Scribe did not write stalls", publishErr(publish.ReasonSyncIndexConflict), string(publish.ReasonSyncIndexConflict), stalled, 30 * time.Second},
		{"asking for more than the TenantPolicy grants stalls", tagged(ReasonNotPermitted), ReasonNotPermitted, stalled, 30 * time.Second},
		{"two policies for one namespace stall", tagged(ReasonPolicyConflict), ReasonPolicyConflict, stalled, 30 * time.Second},
		{"a Secret not bound to the URL stalls", tagged(ReasonCredentialNotBound), ReasonCredentialNotBound, stalled, 30 * time.Second},
		// A dependency on its way.
		{"a Repository not ready yet waits", tagged(ReasonRepositoryNotReady), ReasonRepositoryNotReady, waiting, 5 * time.Second},
		{"a catalog not ready yet waits", tagged(ReasonCatalogNotReady), ReasonCatalogNotReady, waiting, 5 * time.Second},
		// The remote's trouble: steady retries, for every kind.
		{"an unreachable remote retries steadily", publishErr(publish.ReasonUnreachable), string(publish.ReasonUnreachable), steady, 5 * time.Second},
		{"a push conflict retries steadily", publishErr(publish.ReasonConflict), string(publish.ReasonConflict), steady, 5 * time.Second},
		{"refused credentials retry steadily", publishErr(publish.ReasonAuthentication), string(publish.ReasonAuthentication), steady, 5 * time.Second},
		{"a host key mismatch retries steadily", publishErr(publish.ReasonHostKey), string(publish.ReasonHostKey), steady, 5 * time.Second},
		{"a rejected push retries steadily", publishErr(publish.ReasonRejected), string(publish.ReasonRejected), steady, 5 * time.Second},
		// Anything else is returned: controller-runtime backs off.
		{"a failed publish backs off", publishErr(publish.ReasonFailed), string(publish.ReasonFailed), backoff, 0},
		// A damaged cache or a panic was already retried once on a fresh
		// cache inside the sink: controller-runtime's backoff, not a stall.
		{"a cache still damaged after its rebuild backs off", publishErr(publish.ReasonCacheCorrupt), string(publish.ReasonCacheCorrupt), backoff, 0},
		{"a recovered panic backs off", publishErr(publish.ReasonInternal), string(publish.ReasonInternal), backoff, 0},
		{"an unclassified error backs off", errors.New("etcd is slow"), string(publish.ReasonFailed), backoff, 0},
		{"an unreadable cluster fact backs off", tagged(ReasonResolveFailed), ReasonResolveFailed, backoff, 0},
		{"an invalid signing key backs off", tagged(ReasonSigningKeyInvalid), ReasonSigningKeyInvalid, backoff, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := classify(tc.err)
			outcome := backoff
			switch {
			case f.Stalled:
				outcome = stalled
			case f.Waiting:
				outcome = waiting
			case f.RequeueAfter > 0:
				outcome = steady
			}
			if f.Reason != tc.reason || outcome != tc.outcome || f.RequeueAfter != tc.requeue {
				t.Fatalf("classify = %s, %s, requeue %s; want %s, %s, requeue %s", f.Reason, outcome, f.RequeueAfter, tc.reason, tc.outcome, tc.requeue)
			}
			res, err := fail(&scribev1.Workload{}, tc.err)
			if res.RequeueAfter != tc.requeue || (err != nil) != (tc.outcome == backoff) {
				t.Fatalf("fail = %+v, %v; want requeue %s, error returned %v", res, err, tc.requeue, tc.outcome == backoff)
			}
		})
	}
}

func TestFailSetsTheSameConditionsOnEveryKind(t *testing.T) {
	type conds struct {
		ready, stalled, reconciling string // "" when absent, else status/reason
	}
	state := func(obj conditions.Getter) conds {
		get := func(typ string) string {
			c := conditions.Get(obj, typ)
			if c == nil {
				return ""
			}
			return string(c.Status) + "/" + c.Reason
		}
		return conds{get(scribev1.ReadyCondition), get(scribev1.StalledCondition), get(scribev1.ReconcilingCondition)}
	}
	for _, tc := range []struct {
		name   string
		before []metav1.Condition
		err    error
		want   conds
	}{
		{"a stall replaces Reconciling",
			[]metav1.Condition{{Type: scribev1.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: ReasonProgressing}},
			tagged(ReasonSecretNotFound), conds{"False/SecretNotFound", "True/SecretNotFound", ""}},
		{"waiting for a dependency replaces Stalled with Reconciling",
			[]metav1.Condition{{Type: scribev1.StalledCondition, Status: metav1.ConditionTrue, Reason: scribev1.RenderFailedReason}},
			tagged(ReasonRepositoryNotReady), conds{"False/RepositoryNotReady", "", "True/RepositoryNotReady"}},
		{"the remote's trouble is said in Ready only",
			[]metav1.Condition{{Type: scribev1.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: ReasonProgressing}},
			publishErr(publish.ReasonUnreachable), conds{"False/RemoteUnreachable", "", "True/Progressing"}},
		{"an unclassified error is said in Ready",
			[]metav1.Condition{{Type: scribev1.ReadyCondition, Status: metav1.ConditionTrue, Reason: ReasonSucceeded}},
			tagged(ReasonResolveFailed), conds{"False/ResolveFailed", "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []object{&scribev1.Workload{}, &scribev1.Experiment{}, &scribev1.Repository{}}
			for _, obj := range objs {
				obj.SetConditions(append([]metav1.Condition(nil), tc.before...))
				_, _ = fail(obj, tc.err)
				if got := state(obj); got != tc.want {
					t.Errorf("%T: conditions %+v, want %+v", obj, got, tc.want)
				}
			}
		})
	}
}
