package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// Labels and annotations of a Pipeline's stage Workloads.
const (
	// PipelineLabel names the Pipeline a stage Workload belongs to.
	PipelineLabel = "scribe.dev/pipeline"
	// StageLabel names the stage a stage Workload runs.
	StageLabel = "scribe.dev/stage"
	// PromotedVersionAnnotation is the version the Pipeline last promoted
	// into a stage Workload from the stage before.
	PromotedVersionAnnotation = "scribe.dev/promoted-version"
	// PromotionEvidenceAnnotation is what that version showed in the stage
	// before; the first step of its rollout carries it in its pull request
	// and commit message.
	PromotionEvidenceAnnotation = "scribe.dev/promotion-evidence"
)

// Reasons of a Pipeline's conditions.
const (
	// ReasonStageRolledBack: a stage rolled back the version it was given.
	ReasonStageRolledBack = "StageRolledBack"
	// ReasonStageStalled: a stage's Workload cannot move without a change
	// (its pull request closed, its Repository missing).
	ReasonStageStalled = "StageStalled"
	// ReasonStageConflict: a Workload of a stage's name exists that is
	// not the Pipeline's.
	ReasonStageConflict = "StageConflict"
	// ReasonVersionRemoved: a stage runs a version no longer in the template.
	ReasonVersionRemoved = "VersionRemoved"
)

// StageWorkloadName is the Workload of a Pipeline's stage.
func StageWorkloadName(pipeline, stage string) string { return pipeline + "-" + stage }

// PipelineDecision is what DecidePipeline says to record and do.
type PipelineDecision struct {
	// Status to record; a stage's Admitted is saved before its Workload changes.
	Status scribev1.PipelineStatus
	// Requeue is when a soak ends (0: nothing to wait for but the stages'
	// Workloads, which are watched).
	Requeue time.Duration
	Marks   []Mark
	Events  []Event
}

// DecidePipeline is the promotion state machine of a Pipeline: from its
// spec, status, its stage Workloads (by stage name; nil when absent) and
// the time, the status to record. Each stage's Workload is then made to
// carry the template's versions up to the stage's Admitted one (see
// StageWorkloadSpec).
//
//   - The first stage is admitted the newest template version at once.
//   - A stage's Workload reports its rollout; the stage mirrors it
//     (stable, in flight, step, pull request) and records a rollback of
//     its admitted version as Failed: that version goes no further.
//   - Once the admitted version is stable, healthy and its analysis
//     passing in the stage for the stage's soak, it is Verified there,
//     and the next stage is admitted it, unless it already runs a newer
//     version.
//
// A stage that is not in the spec any more is dropped; the stage after
// it is fed by the one before it from then on.
func DecidePipeline(p *scribev1.Pipeline, stages map[string]*scribev1.Workload, now time.Time) PipelineDecision {
	d := PipelineDecision{Status: *p.Status.DeepCopy()}
	st := &d.Status
	st.ObservedGeneration = p.Generation
	versions := p.Spec.Template.Versions
	st.Version = versions[len(versions)-1].Name
	old := map[string]scribev1.PipelineStageStatus{}
	for _, s := range st.Stages {
		old[s.Name] = s
	}
	st.Stages = make([]scribev1.PipelineStageStatus, 0, len(p.Spec.Stages))
	var upstream *scribev1.PipelineStageStatus
	for i, spec := range p.Spec.Stages {
		s := old[spec.Name]
		s.Name, s.Workload = spec.Name, StageWorkloadName(p.Name, spec.Name)
		// Admission.
		offer := st.Version
		if i > 0 {
			offer = upstream.Verified
		}
		if offer != "" && newer(versions, offer, s.Admitted) {
			if s.Admitted != "" || i > 0 {
				d.Events = append(d.Events, normalEvent("Promoted", "%s admitted to stage %s%s", offer, spec.Name, from(upstream)))
			}
			s.Admitted, s.HealthySince, s.Failed = offer, nil, ""
		}
		observe(&s, stages[spec.Name], spec, now, &d)
		st.Stages = append(st.Stages, s)
		upstream = &st.Stages[len(st.Stages)-1]
	}
	d.Marks = pipelineMarks(p, st, stages)
	st.Summary = pipelineSummary(st, stages)
	return d
}

// observe mirrors the stage Workload w into s and verifies the admitted
// version once it has soaked.
func observe(s *scribev1.PipelineStageStatus, w *scribev1.Workload, spec scribev1.PipelineStage, now time.Time, d *PipelineDecision) {
	s.Message = ""
	if w == nil || s.Admitted == "" {
		s.Stable, s.InFlight, s.Step, s.Phase, s.Revision, s.PullRequest = "", "", -1, "", "", nil
		if s.Admitted == "" {
			s.Message = "waiting for a version verified upstream"
		}
		return
	}
	ws := &w.Status
	s.Stable, s.InFlight, s.Step, s.Phase, s.Revision = ws.StableVersion, ws.CanaryVersion, ws.Step, ws.Phase, ws.Revision
	if ws.CanaryVersion == "" {
		s.Step = -1
	}
	s.PullRequest = ws.PullRequest.DeepCopy()
	if w.Generation != ws.ObservedGeneration {
		// Its Workload has not acted on its spec yet.
		s.HealthySince = nil
		s.Message = "the stage's Workload has not observed its spec yet"
		return
	}
	if ws.RolledBackVersion == s.Admitted && ws.RolledBackVersion != "" {
		if s.Failed != s.Admitted {
			d.Events = append(d.Events, warningEvent("StageRolledBack", "stage %s rolled back %s: %s", s.Name, s.Admitted, ws.Message))
		}
		s.Failed, s.HealthySince = s.Admitted, nil
		s.Message = ws.Message
		return
	}
	if !stableAndHealthy(w, s.Admitted) {
		s.HealthySince = nil
		if c := apimeta.FindStatusCondition(ws.Conditions, scribev1.ReadyCondition); c != nil {
			s.Message = c.Message
		}
		return
	}
	if s.Verified == s.Admitted {
		return
	}
	if s.HealthySince == nil {
		at := metav1.NewTime(now)
		s.HealthySince = &at
	}
	soak := time.Duration(0)
	if spec.Soak != nil {
		soak = spec.Soak.Duration
	}
	if wait := soak - now.Sub(s.HealthySince.Time); wait > 0 {
		s.Message = fmt.Sprintf("%s stable and healthy; soaking for %s more", s.Admitted, wait.Round(time.Second))
		if d.Requeue == 0 || wait < d.Requeue {
			d.Requeue = wait
		}
		return
	}
	s.Verified = s.Admitted
	s.Evidence = verifiedEvidence(s, w, soak, now)
	d.Events = append(d.Events, normalEvent("Verified", "%s verified in stage %s after a soak of %s", s.Admitted, s.Name, soak))
}

// stableAndHealthy says version is w's stable version, applied, healthy
// and with its last analysis passing, and nothing else rolls out.
func stableAndHealthy(w *scribev1.Workload, version string) bool {
	ws := &w.Status
	if ws.Phase != scribev1.WorkloadHealthy || ws.StableVersion != version || ws.CanaryVersion != "" || ws.Revision == "" {
		return false
	}
	if !apimeta.IsStatusConditionTrue(ws.Conditions, scribev1.ReadyCondition) {
		return false
	}
	for _, c := range ws.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
}

// verifiedEvidence is what a verified version showed in the stage, for the
// next stage's pull request.
func verifiedEvidence(s *scribev1.PipelineStageStatus, w *scribev1.Workload, soak time.Duration, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s was stable and healthy in stage %s (Workload %s, commit %s) from %s to %s, a soak of %s.",
		s.Admitted, s.Name, w.Name, shortRev(w.Status.Revision), s.HealthySince.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), soak)
	for _, c := range w.Status.Checks {
		fmt.Fprintf(&b, "\n- check %s passed: %s", c.Name, c.Message)
	}
	if w.Status.Evidence != "" {
		b.WriteString("\n\nIts last step there: " + w.Status.Evidence)
	}
	return b.String()
}

// newer says a is a later template version than b ("" and versions no
// longer in the template are older than any).
func newer(versions []scribev1.Version, a, b string) bool {
	ia, ib := versionIndex(versions, a), versionIndex(versions, b)
	return ia >= 0 && ia > ib
}

func versionIndex(versions []scribev1.Version, name string) int {
	return slices.IndexFunc(versions, func(v scribev1.Version) bool { return v.Name == name })
}

func from(upstream *scribev1.PipelineStageStatus) string {
	if upstream == nil {
		return ""
	}
	return ", verified in stage " + upstream.Name
}

// pipelineMarks are the Pipeline's conditions: Ready once every stage
// runs the newest version; otherwise why not, stage by stage.
func pipelineMarks(p *scribev1.Pipeline, st *scribev1.PipelineStatus, stages map[string]*scribev1.Workload) []Mark {
	for _, s := range st.Stages {
		w := stages[s.Name]
		if w != nil && !metav1.IsControlledBy(w, p) {
			return []Mark{
				markStalled(ReasonStageConflict, "Workload %s of stage %s exists and does not belong to this Pipeline", w.Name, s.Name),
				markNotReady(ReasonStageConflict, "Workload %s of stage %s exists and does not belong to this Pipeline", w.Name, s.Name),
			}
		}
		if s.Admitted != "" && versionIndex(p.Spec.Template.Versions, s.Admitted) < 0 {
			return []Mark{
				markStalled(ReasonVersionRemoved, "stage %s runs %s, which spec.template.versions no longer names", s.Name, s.Admitted),
				markNotReady(ReasonVersionRemoved, "stage %s runs %s, which spec.template.versions no longer names", s.Name, s.Admitted),
			}
		}
		if s.Failed != "" && s.Failed == s.Admitted {
			return []Mark{
				markNotReady(ReasonStageRolledBack, "stage %s rolled back %s; later stages keep their versions: %s", s.Name, s.Failed, s.Message),
				unmark(scribev1.ReconcilingCondition),
				unmark(scribev1.StalledCondition),
			}
		}
		if w != nil && apimeta.IsStatusConditionTrue(w.Status.Conditions, scribev1.StalledCondition) {
			c := apimeta.FindStatusCondition(w.Status.Conditions, scribev1.StalledCondition)
			return []Mark{
				markStalled(ReasonStageStalled, "stage %s: %s", s.Name, c.Message),
				markNotReady(ReasonStageStalled, "stage %s: %s", s.Name, c.Message),
			}
		}
	}
	for i, s := range st.Stages {
		last := i == len(st.Stages)-1
		if s.Verified == st.Version || last && s.Stable == st.Version && s.InFlight == "" && s.Phase == scribev1.WorkloadHealthy {
			continue
		}
		msg := fmt.Sprintf("stage %s: %s", s.Name, s.Message)
		if s.Message == "" {
			msg = fmt.Sprintf("stage %s: %s in flight", s.Name, st.Version)
		}
		return []Mark{
			markReconciling(ReasonProgressing, "%s", msg),
			markNotReady(ReasonProgressing, "%s", msg),
		}
	}
	return []Mark{
		markReady("%s is stable in every stage", st.Version),
		unmark(scribev1.ReconcilingCondition),
		unmark(scribev1.StalledCondition),
	}
}

// pipelineSummary is every stage at a glance for `kubectl get`:
// `dev=v2 staging=v1>v2(1/3,#4) prod=v1`.
func pipelineSummary(st *scribev1.PipelineStatus, stages map[string]*scribev1.Workload) string {
	parts := make([]string, 0, len(st.Stages))
	for _, s := range st.Stages {
		v := s.Stable
		if v == "" {
			v = "-"
		}
		switch {
		case s.InFlight != "":
			detail := []string{}
			if w := stages[s.Name]; w != nil && s.Stable != "" { // a first rollout has no steps
				detail = append(detail, fmt.Sprintf("%d/%d", s.Step+1, len(steps(w))))
			}
			if s.PullRequest != nil && s.PullRequest.Number > 0 {
				detail = append(detail, fmt.Sprintf("#%d", s.PullRequest.Number))
			}
			v += ">" + s.InFlight
			if len(detail) > 0 {
				v += "(" + strings.Join(detail, ",") + ")"
			}
		case s.Failed != "" && s.Failed == s.Admitted:
			v += "!" + s.Failed
		}
		parts = append(parts, s.Name+"="+v)
	}
	return strings.Join(parts, " ")
}

// StageWorkloadSpec is the spec of a stage's Workload: the template with
// the stage's Repository and review, and the template's versions up to the
// one admitted to the stage. ok is false when the stage has no version
// yet, or runs one the template no longer names.
func StageWorkloadSpec(p *scribev1.Pipeline, stage scribev1.PipelineStage, admitted string) (spec scribev1.WorkloadSpec, ok bool) {
	i := versionIndex(p.Spec.Template.Versions, admitted)
	if i < 0 {
		return scribev1.WorkloadSpec{}, false
	}
	spec = *p.Spec.Template.DeepCopy()
	spec.Versions = spec.Versions[:i+1]
	ref := stage.RepositoryRef
	spec.RepositoryRef = &ref
	if stage.Review != "" {
		if spec.Rollout == nil {
			spec.Rollout = &scribev1.Rollout{}
		}
		spec.Rollout.Promotion = stage.Review
	}
	return spec, true
}

// promotionEvidence is evidence with, in front, what the version rolling
// out showed in the previous stage of its Pipeline, for the first step of
// its rollout in this stage (the annotations the Pipeline sets). Only
// trusted annotations count: the Pipeline's, as DecidePipelineGate found
// them; anyone else's are ignored.
func promotionEvidence(w *scribev1.Workload, trusted bool, evidence string) string {
	v, ev := w.Annotations[PromotedVersionAnnotation], w.Annotations[PromotionEvidenceAnnotation]
	if !trusted || v == "" || ev == "" || v != w.Status.CanaryVersion || w.Status.Step != 0 {
		return evidence
	}
	return strings.TrimSpace("Promoted from the previous stage: " + ev + "\n\n" + evidence)
}
