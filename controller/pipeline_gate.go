package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// ReasonNotWrittenByPipeline: a Pipeline's stage Workload is not as its
// Pipeline last wrote it (a change someone else made), so it is neither
// rendered nor committed until the Pipeline has written it again.
const ReasonNotWrittenByPipeline = "NotWrittenByPipeline"

// PipelineGate is what DecidePipelineGate says of a Workload.
type PipelineGate struct {
	// Publish: the Workload may be rendered and committed.
	Publish bool
	// TrustPromotion: its promotion annotations are the Pipeline's, and
	// its commits and pull requests may say it was promoted.
	TrustPromotion bool
	// Stalled: not published until someone acts (the claim of a Pipeline
	// that is missing, or that does not own it); otherwise it waits for
	// its Pipeline to write it again.
	Stalled bool
	// Message says why it is not published (Publish false).
	Message string
}

// DecidePipelineGate says whether the Workload w is published, and
// whether its promotion evidence is trusted. p is the Pipeline that claims
// w: the one an ownerReference of w names, or else the one with a stage
// whose Workload bears w's name; nil when there is none (or the one named
// is not found).
//
//   - A Workload no Pipeline claims is published; promotion evidence on
//     it is not trusted, whoever wrote it.
//   - A Workload a Pipeline claims is published, its evidence trusted,
//     only while it is that Pipeline's (its controller reference names
//     the Pipeline's UID) and its spec and promotion annotations are what
//     the Pipeline last wrote (PipelineWrite, recorded in the Pipeline's
//     status, which only the controller writes). Anything else, a
//     tenant's edit, an owner reference removed or forged, is held back
//     with ReasonNotWrittenByPipeline; the Pipeline writes the Workload
//     again and it moves on.
func DecidePipelineGate(w *scribev1.Workload, p *scribev1.Pipeline) PipelineGate {
	ref := pipelineOwnerRef(w)
	if p == nil {
		if ref == nil {
			return PipelineGate{Publish: true}
		}
		return PipelineGate{Stalled: true, Message: fmt.Sprintf("its owner, Pipeline %s, is not found", ref.Name)}
	}
	stage := ""
	var st *scribev1.PipelineStageStatus
	for i := range p.Status.Stages {
		if s := &p.Status.Stages[i]; StageWorkloadName(p.Name, s.Name) == w.Name {
			stage, st = s.Name, s
		}
	}
	switch {
	case ref == nil || ref.UID != p.UID || ref.Controller == nil || !*ref.Controller:
		what := "is not controlled by it"
		if stage != "" {
			what = fmt.Sprintf("bears the name of its stage %s but is not controlled by it", stage)
		}
		return PipelineGate{Stalled: true, Message: fmt.Sprintf("Pipeline %s claims this Workload, which %s; only the Pipeline may write its stages' Workloads", p.Name, what)}
	case st == nil:
		return PipelineGate{Stalled: true, Message: fmt.Sprintf("Pipeline %s has no stage whose Workload is %s", p.Name, w.Name)}
	case st.WorkloadDigest == "":
		return PipelineGate{Message: fmt.Sprintf("Pipeline %s has not recorded what it wrote to stage %s yet", p.Name, stage)}
	}
	got, err := PipelineWrite(w)
	if err != nil {
		return PipelineGate{Message: err.Error()}
	}
	if got != st.WorkloadDigest {
		return PipelineGate{Message: fmt.Sprintf("its spec or promotion annotations are not what Pipeline %s last wrote for stage %s: a change the Pipeline did not make is not committed (the Pipeline writes the Workload again)", p.Name, stage)}
	}
	return PipelineGate{Publish: true, TrustPromotion: true}
}

// pipelineOwnerRef is w's ownerReference to a Pipeline, the controller
// one first; nil when it has none.
func pipelineOwnerRef(w *scribev1.Workload) *metav1.OwnerReference {
	var out *metav1.OwnerReference
	for i := range w.OwnerReferences {
		r := &w.OwnerReferences[i]
		if r.Kind != scribev1.PipelineKind || !isScribeAPIVersion(r.APIVersion) {
			continue
		}
		if r.Controller != nil && *r.Controller {
			return r
		}
		if out == nil {
			out = r
		}
	}
	return out
}

func isScribeAPIVersion(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == scribev1.GroupVersion.Group
}

// PipelineWrite is the digest of what a Pipeline writes to a stage's
// Workload: its spec and promotion annotations, in a canonical JSON (map
// keys sorted, numbers as the API server decodes them), so the copy the
// API server returned to the Pipeline and the one the Workload's
// reconciler reads agree.
func PipelineWrite(w *scribev1.Workload) (string, error) {
	raw, err := json.Marshal(struct {
		Spec     scribev1.WorkloadSpec `json:"spec"`
		Version  string                `json:"promotedVersion"`
		Evidence string                `json:"promotionEvidence"`
	}{w.Spec, w.Annotations[PromotedVersionAnnotation], w.Annotations[PromotionEvidenceAnnotation]})
	if err != nil {
		return "", fmt.Errorf("digest the spec of workload %s/%s: %w", w.Namespace, w.Name, err)
	}
	var canonical any
	if err := json.Unmarshal(raw, &canonical); err != nil {
		return "", fmt.Errorf("digest the spec of workload %s/%s: %w", w.Namespace, w.Name, err)
	}
	raw, err = json.Marshal(canonical)
	if err != nil {
		return "", fmt.Errorf("digest the spec of workload %s/%s: %w", w.Namespace, w.Name, err)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
