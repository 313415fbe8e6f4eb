package controller

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// renderMemoSize bounds the custom resources whose last render is kept:
// a summary is a few KB (a few hundred for the largest Experiment), so the
// memo stays under ~10 MB whatever the number of CRs.
const renderMemoSize = 4096

// renderMemo remembers, per custom resource (by kind and UID), the digest
// of its last render's input and what a reconcile needs of that render
// when nothing is to be committed: the bundle without its files (digest,
// objects, sync object, read-back). A Workload or Experiment waiting (for
// its applier, a workflow, a pull request's merge) is reconciled every
// poll interval; rendering is a pure function of its input, so a poll
// whose input did not change skips the render (decideRender). One entry
// per CR, the least recently used dropped first. It lives on the
// Publisher, shared by the reconcilers.
type renderMemo struct {
	mu    sync.Mutex
	order *list.List // of *memoEntry, most recent first
	byCR  map[string]*list.Element
}

// memoEntry is one CR's last render: the digest of its input and the
// bundle without files.
type memoEntry struct {
	cr      string
	input   [32]byte
	summary *render.Bundle
}

// renderReason says why a render is (or is not) needed.
type renderReason string

const (
	// renderReuse: the input is the one last rendered; the memo answers.
	renderReuse renderReason = ""
	// renderFirst: the memo has no render of this CR (new, or dropped).
	renderFirst renderReason = "NotRendered"
	// renderInputChanged: the CR's generation, the catalog, the
	// Repository's publish input, the template version or another render
	// input changed.
	renderInputChanged renderReason = "InputChanged"
	// renderFiles: a commit needs the files, which the memo does not keep.
	renderFiles renderReason = "FilesNeeded"
	// renderNoKey: the input could not be digested (or its engine has no
	// stable identity): always rendered.
	renderNoKey renderReason = "NotMemoized"
)

// decideRender is the memo's decision: render again unless the memo holds
// a render of this very input and no files are needed. last is the memo's
// entry for the CR (nil when none); keyed says the input has a digest.
func decideRender(last *memoEntry, input [32]byte, keyed, needFiles bool) renderReason {
	switch {
	case !keyed:
		return renderNoKey
	case needFiles:
		return renderFiles
	case last == nil:
		return renderFirst
	case last.input != input:
		return renderInputChanged
	}
	return renderReuse
}

// memoCR names a CR in the memo: its kind and UID (namespace and name for
// an object that never went through an API server).
func memoCR(kind string, o metav1.Object) string {
	if o.GetUID() == "" {
		return kind + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	return kind + "/" + string(o.GetUID())
}

// inputDigest hashes a render's input: what the engine is given (obj is
// the CR with what render does not read removed, rest the other inputs)
// and which engine renders it (engine: the template version, or the user
// catalog's artifact).
func inputDigest(engine string, obj any, rest ...any) ([32]byte, bool) {
	data, err := json.Marshal(append([]any{engine, obj}, rest...))
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(data), true
}

// workloadDigest digests a Workload render's input. The Workload's status
// is not part of it (render does not read it: the split is Traffic and
// Stable), nor are its resourceVersion and managedFields, which change
// with every status patch.
func workloadDigest(engine string, in render.WorkloadInput) ([32]byte, bool) {
	w := *in.Workload
	w.Status = scribev1.WorkloadStatus{}
	w.ResourceVersion, w.ManagedFields = "", nil
	in.Workload = &w
	return inputDigest(engine, in)
}

// experimentDigest digests an Experiment render's input: its metadata and
// spec (generation included), the stage, what was resolved (OTLP
// endpoint, GCP project, catalog source and revision) and the publish
// input (the Repository's path, applier and allowed namespaces). Status,
// resourceVersion and managedFields are left out: the stage comes as
// in.Stage and the sync name as in.Publish.SyncName.
func experimentDigest(engine string, in render.ExperimentInput) ([32]byte, bool) {
	e := *in.Experiment
	e.Status = scribev1.ExperimentStatus{}
	e.ResourceVersion, e.ManagedFields = "", nil
	in.Experiment = &e
	return inputDigest(engine, in)
}

// get returns the memo's entry for cr, or nil.
func (m *renderMemo) get(cr string) *memoEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byCR[cr]
	if !ok {
		return nil
	}
	m.order.MoveToFront(el)
	return el.Value.(*memoEntry)
}

// put remembers b, the render of cr's input, without its files.
func (m *renderMemo) put(cr string, input [32]byte, b *render.Bundle) {
	s := *b
	s.Files = nil
	e := &memoEntry{cr: cr, input: input, summary: &s}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byCR == nil {
		m.byCR, m.order = map[string]*list.Element{}, list.New()
	}
	if el, ok := m.byCR[cr]; ok {
		el.Value = e
		m.order.MoveToFront(el)
		return
	}
	m.byCR[cr] = m.order.PushFront(e)
	for m.order.Len() > renderMemoSize {
		last := m.order.Back()
		delete(m.byCR, last.Value.(*memoEntry).cr)
		m.order.Remove(last)
	}
}
