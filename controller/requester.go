package controller

// Who asked: scribe.dev/requested-by is what the requester's client
// wrote, and anyone who may edit a Workload can write any name there.
// config/admission/requester.yaml (a MutatingAdmissionPolicy) has the API
// server write the authenticated username of whoever sets or changes a
// request annotation into scribe.dev/requested-by-verified. That
// annotation is as forgeable as the other where the policy is not in
// force, so the reconciler believes it only after asking the API server:
// a dry-run write of it that comes back rewritten says the policy stamps
// this Workload.

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// requesterProbe is the value the probe writes: no authenticated username
// (a user's, or the controller's ServiceAccount's) reads like it, so an
// answer that still holds it was not rewritten.
const requesterProbe = "(scribe requester probe)"

// RequesterPolicyInForce says the API server rewrites
// scribe.dev/requested-by-verified on the Workload namespace/name with the
// writer's username (the requester policy binds it): it writes
// requesterProbe there as a dry run (admission runs, nothing is stored)
// and reads the answer.
func RequesterPolicyInForce(ctx context.Context, c client.Client, namespace, name string) (bool, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		scribev1.RequestedByVerifiedAnnotation: requesterProbe,
	}}})
	if err != nil {
		return false, fmt.Errorf("encode the requester probe: %w", err)
	}
	probe := &scribev1.Workload{}
	probe.Namespace, probe.Name = namespace, name
	if err := c.Patch(ctx, probe, client.RawPatch(types.MergePatchType, patch), client.DryRunAll); err != nil {
		return false, fmt.Errorf("probe the requester policy on workload %s/%s: %w", namespace, name, err)
	}
	got, ok := probe.Annotations[scribev1.RequestedByVerifiedAnnotation]
	return ok && got != requesterProbe, nil
}

// requests reads w's manual requests. Only when one is pending (about to
// be carried out and recorded) and the verified annotation is set does
// it ask the API server whether the requester policy is in force for w:
// one dry-run write per request a person makes, none otherwise. A probe
// that fails leaves the requester a claim.
func (r *WorkloadReconciler) requests(ctx context.Context, w *scribev1.Workload) ManualRequests {
	m := RequestsOf(w.Annotations, false)
	if !m.PendingIn(w.Status.Requests) || w.Annotations[scribev1.RequestedByVerifiedAnnotation] == "" {
		return m
	}
	verified, err := RequesterPolicyInForce(ctx, r.Publisher.Client, w.Namespace, w.Name)
	if err != nil {
		log.FromContext(ctx).Info("requester shown as claimed", "reason", err.Error())
	}
	return RequestsOf(w.Annotations, verified)
}
