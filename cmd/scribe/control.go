package main

// The verbs that operate a rollout or stop a reconciliation by writing
// Scribe's own resources, never a workload: promote, abort and retry set
// a request annotation the controller carries out once (as Flux's
// reconcile.fluxcd.io/requestedAt); pause, suspend and resume set
// spec.paused and spec.suspend (as Argo Rollouts' spec.paused and Flux's
// spec.suspend).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// controlFlags are the flags of the control verbs.
type controlFlags struct {
	kube   kubeFlags
	reason string
	full   bool
}

// controlVerb is one verb: which kinds it takes and the merge patch it
// writes (by is who asks, at the request's value).
type controlVerb struct {
	use, short, long, example string
	kinds                     []string
	patch                     func(kind string, f *controlFlags, by, at string) map[string]any
	done                      string
}

func requestPatch(annotation string) func(string, *controlFlags, string, string) map[string]any {
	return func(_ string, f *controlFlags, by, at string) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			annotation:                       at,
			scribev1.RequestedByAnnotation:   nullIfEmpty(by),
			scribev1.RequestReasonAnnotation: nullIfEmpty(f.reason),
		}}}
	}
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func controlVerbs() []controlVerb {
	return []controlVerb{{
		use:   "promote",
		short: "Lift the pause of a rollout's current step, or promote it in full (--full)",
		long: `Promote lifts the pause of the Workload's current step: a step with
"pause: {}" is held until promoted, a timed pause is cut short. The step
still waits until it is applied and healthy and its analysis passes. With
--full the canary becomes the stable version now, past its remaining steps,
pauses and analysis. In pull-request mode the next step (or the full
promotion) is proposed as its pull request, which still needs its merge.`,
		example: `  scribe promote workload checkout -n shop
  scribe promote wl checkout -n shop --full --reason "hotfix verified by hand"`,
		kinds: []string{scribev1.WorkloadKind},
		patch: func(kind string, f *controlFlags, by, at string) map[string]any {
			if f.full {
				return requestPatch(scribev1.PromoteFullAnnotation)(kind, f, by, at)
			}
			return requestPatch(scribev1.PromoteAnnotation)(kind, f, by, at)
		},
		done: "promotion requested",
	}, {
		use:   "abort",
		short: "Roll a rollout back now, committed like any rollback",
		long: `Abort sends all traffic back to the stable version now. The rollback is
committed (or proposed, as spec.rollout.rollback says) like any rollback,
its commit message and the Workload's events saying who aborted and why
(--reason). The aborted version is not rolled out again until "scribe
retry" or a newer version in spec.versions. In pull-request mode, a step's
pull request that is not merged yet is left open and its branch is
reused by the Workload's next proposal; close it on the forge.`,
		example: `  scribe abort workload checkout -n shop --reason "p99 latency doubled"`,
		kinds:   []string{scribev1.WorkloadKind},
		patch:   requestPatch(scribev1.AbortAnnotation),
		done:    "abort requested",
	}, {
		use:     "retry",
		short:   "Roll out an aborted or rolled-back version again from its first step",
		example: `  scribe retry workload checkout -n shop`,
		kinds:   []string{scribev1.WorkloadKind},
		patch:   requestPatch(scribev1.RetryAnnotation),
		done:    "retry requested",
	}, {
		use:   "pause",
		short: "Hold a rollout at its current step (spec.paused)",
		long: `Pause sets the Workload's spec.paused: its rollout neither advances nor
promotes, while its analysis goes on and can still roll it back. "scribe
resume" clears it.`,
		example: `  scribe pause workload checkout -n shop`,
		kinds:   []string{scribev1.WorkloadKind},
		patch: func(string, *controlFlags, string, string) map[string]any {
			return map[string]any{"spec": map[string]any{"paused": true}}
		},
		done: "paused",
	}, {
		use:   "suspend",
		short: "Stop reconciling a Workload, Pipeline or Experiment (spec.suspend)",
		long: `Suspend sets spec.suspend: the controller renders, commits and reads back
nothing for the object until "scribe resume" (a deletion is still carried
out). A suspended Pipeline moves no version between its stages; its stage
Workloads go on with what they have.`,
		example: `  scribe suspend workload checkout -n shop
  scribe suspend experiment gateway-tutorial -n research`,
		kinds: []string{scribev1.WorkloadKind, scribev1.PipelineKind, scribev1.ExperimentKind},
		patch: func(string, *controlFlags, string, string) map[string]any {
			return map[string]any{"spec": map[string]any{"suspend": true}}
		},
		done: "suspended",
	}, {
		use:   "resume",
		short: "Undo pause and suspend",
		long:  `Resume clears spec.suspend, and a Workload's spec.paused.`,
		example: `  scribe resume workload checkout -n shop
  scribe resume pipeline checkout -n shop`,
		kinds: []string{scribev1.WorkloadKind, scribev1.PipelineKind, scribev1.ExperimentKind},
		patch: func(kind string, _ *controlFlags, _, _ string) map[string]any {
			spec := map[string]any{"suspend": nil}
			if kind == scribev1.WorkloadKind {
				spec["paused"] = nil
			}
			return map[string]any{"spec": spec}
		},
		done: "resumed",
	}}
}

func newControlCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, v := range controlVerbs() {
		var f controlFlags
		kinds := make([]string, len(v.kinds))
		for i, k := range v.kinds {
			kinds[i] = strings.ToLower(k)
		}
		long := v.long
		if long == "" {
			long = v.short + "."
		}
		cmd := &cobra.Command{
			Use:     v.use + " " + strings.Join(kinds, "|") + " NAME",
			Short:   v.short,
			Long:    long + "\n\nIt writes with your kubeconfig, as kubectl does; the controller acts on it.",
			Example: v.example,
			Args:    cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				return runControl(cmd.Context(), cmd, v, &f, args)
			},
		}
		fl := cmd.Flags()
		f.kube.add(fl)
		if v.use == "promote" || v.use == "abort" || v.use == "retry" {
			fl.StringVar(&f.reason, "reason", "", "why, for the commit message, events and status.history")
		}
		if v.use == "promote" {
			fl.BoolVar(&f.full, "full", false, "promote now, past the remaining steps, pauses and analysis")
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

func runControl(ctx context.Context, cmd *cobra.Command, v controlVerb, f *controlFlags, args []string) error {
	kind, err := parseGetKind(args[0])
	if err != nil {
		return err
	}
	allowed := false
	for _, k := range v.kinds {
		allowed = allowed || k == kind.kind
	}
	if !allowed {
		return fmt.Errorf("%s acts on %ss only, not on %ss", v.use, strings.Join(v.kinds, "s, "), kind.kind)
	}
	cfg, ns, err := f.kube.config()
	if err != nil {
		return err
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	obj, err := newObject(kind.kind)
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: ns, Name: args[1]}
	if err := c.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("%s %s: %w", kind.kind, key, err)
	}
	patch, err := json.Marshal(v.patch(kind.kind, f, whoAmI(ctx, c), time.Now().UTC().Format(time.RFC3339Nano)))
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("%s %s: %w", kind.kind, key, err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s/%s in %s: %s\n", strings.ToLower(kind.kind), args[1], ns, v.done)
	return err
}

// newObject is an empty object of kind.
func newObject(kind string) (client.Object, error) {
	switch kind {
	case scribev1.WorkloadKind:
		return &scribev1.Workload{}, nil
	case scribev1.PipelineKind:
		return &scribev1.Pipeline{}, nil
	case scribev1.ExperimentKind:
		return &scribev1.Experiment{}, nil
	}
	return nil, fmt.Errorf("no object of kind %s", kind)
}

// whoAmI is the user the API server authenticates the client as
// (SelfSubjectReview), or "" when it cannot tell.
func whoAmI(ctx context.Context, c client.Client) string {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}
