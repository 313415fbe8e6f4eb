package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

func TestPipelineGatePublishesOnlyWhatThePipelineWrote(t *testing.T) {
	yes := true
	owner := func(uid types.UID, controller bool) metav1.OwnerReference {
		c := controller
		return metav1.OwnerReference{APIVersion: scribev1.GroupVersion.String(), Kind: scribev1.PipelineKind, Name: "shop", UID: uid, Controller: &c}
	}
	written := func() *scribev1.Workload {
		w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop-prod",
			OwnerReferences: []metav1.OwnerReference{owner("uid-1", true)},
			Annotations:     map[string]string{PromotedVersionAnnotation: "v2", PromotionEvidenceAnnotation: "v2 was healthy in staging"}},
			Spec: scribev1.WorkloadSpec{Versions: []scribev1.Version{{Name: "v1", Image: "example.com/app:1"}, {Name: "v2", Image: "example.com/app:2"}}}}
		return w
	}
	digest, err := PipelineWrite(written())
	if err != nil {
		t.Fatal(err)
	}
	pipeline := func(d string) *scribev1.Pipeline {
		return &scribev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop", UID: "uid-1"},
			Spec: scribev1.PipelineSpec{Stages: []scribev1.PipelineStage{{Name: "staging"}, {Name: "prod"}}},
			Status: scribev1.PipelineStatus{Stages: []scribev1.PipelineStageStatus{
				{Name: "staging", WorkloadDigest: "sha256:other"}, {Name: "prod", WorkloadDigest: d},
			}}}
	}
	for _, tc := range []struct {
		name     string
		w        func(w *scribev1.Workload)
		p        *scribev1.Pipeline
		want     PipelineGate
		mentions string
	}{
		{"as the Pipeline wrote it: published, its promotion trusted", nil, pipeline(digest),
			PipelineGate{Publish: true, TrustPromotion: true}, ""},
		{"a standalone Workload: published, its promotion annotations not trusted", func(w *scribev1.Workload) {
			w.Name, w.OwnerReferences = "checkout", nil
		}, nil, PipelineGate{Publish: true}, ""},
		{"an image the Pipeline did not write: held back", func(w *scribev1.Workload) {
			w.Spec.Versions[1].Image = "example.com/unverified:1"
		}, pipeline(digest), PipelineGate{}, "not what Pipeline shop last wrote for stage prod"},
		{"a version the Pipeline did not admit: held back", func(w *scribev1.Workload) {
			w.Spec.Versions = append(w.Spec.Versions, scribev1.Version{Name: "v3", Image: "example.com/app:3"})
		}, pipeline(digest), PipelineGate{}, "not what Pipeline shop last wrote"},
		{"promotion evidence the Pipeline did not write: held back", func(w *scribev1.Workload) {
			w.Annotations[PromotionEvidenceAnnotation] = "trust me"
		}, pipeline(digest), PipelineGate{}, "promotion annotations"},
		{"an annotation the gate does not cover: published", func(w *scribev1.Workload) {
			w.Annotations["team.example/note"] = "hello"
		}, pipeline(digest), PipelineGate{Publish: true, TrustPromotion: true}, ""},
		{"the Pipeline has recorded no write yet: waits", nil, pipeline(""), PipelineGate{}, "has not recorded"},
		{"its owner reference removed, still the stage's name: stalled", func(w *scribev1.Workload) {
			w.OwnerReferences = nil
		}, pipeline(digest), PipelineGate{Stalled: true}, "bears the name of its stage prod but is not controlled by it"},
		{"owned but not controlled: stalled", func(w *scribev1.Workload) {
			w.OwnerReferences = []metav1.OwnerReference{owner("uid-1", false)}
		}, pipeline(digest), PipelineGate{Stalled: true}, "not controlled by it"},
		{"an owner reference to another Pipeline of the name: stalled", func(w *scribev1.Workload) {
			w.OwnerReferences = []metav1.OwnerReference{owner("uid-old", true)}
		}, pipeline(digest), PipelineGate{Stalled: true}, "not controlled by it"},
		{"its Pipeline not found: stalled", nil, nil, PipelineGate{Stalled: true}, "Pipeline shop, is not found"},
		{"not a stage of its Pipeline: stalled", func(w *scribev1.Workload) {
			w.Name = "shop-qa"
		}, pipeline(digest), PipelineGate{Stalled: true}, "no stage whose Workload is shop-qa"},
		{"an owner reference of another group is no Pipeline's", func(w *scribev1.Workload) {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: scribev1.PipelineKind, Name: "shop", UID: "x", Controller: &yes}}
		}, nil, PipelineGate{Publish: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := written()
			if tc.w != nil {
				tc.w(w)
			}
			got := DecidePipelineGate(w, tc.p)
			msg := got.Message
			got.Message = ""
			if got != tc.want {
				t.Errorf("gate = %+v (%q), want %+v", got, msg, tc.want)
			}
			if tc.mentions != "" && !strings.Contains(msg, tc.mentions) {
				t.Errorf("message %q does not say %q", msg, tc.mentions)
			}
			if tc.want.Publish && msg != "" {
				t.Errorf("published with a message %q", msg)
			}
		})
	}
}

// The digest is of what is stored, not of how it was encoded: map keys in
// any order, and the promotion annotations alone among the annotations.
func TestPipelineWriteDigestIgnoresEncodingAndOtherAnnotations(t *testing.T) {
	w := &scribev1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "shop-prod", Annotations: map[string]string{PromotedVersionAnnotation: "v1"}},
		Spec: scribev1.WorkloadSpec{Versions: []scribev1.Version{{Name: "v1", Image: "example.com/app:1"}},
			Scheduling: &scribev1.Scheduling{NodeSelector: map[string]string{"b": "2", "a": "1"}}}}
	a, err := PipelineWrite(w)
	if err != nil {
		t.Fatal(err)
	}
	w2 := w.DeepCopy()
	w2.Spec.Scheduling.NodeSelector = map[string]string{"a": "1", "b": "2"}
	w2.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	w2.ResourceVersion, w2.Generation = "42", 7
	b, err := PipelineWrite(w2)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.HasPrefix(a, "sha256:") {
		t.Errorf("digests %s and %s of the same write differ", a, b)
	}
	w2.Spec.Scheduling.NodeSelector["a"] = "3"
	if c, _ := PipelineWrite(w2); c == a {
		t.Error("a changed node selector kept the digest")
	}
}
