package controller

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/render"
)

// renderMemoSize bounds the render summaries kept: a few KB each, so the
// memo stays under ~10 MB whatever the number of CRs.
const renderMemoSize = 4096

// renderMemo remembers, for the last renders, what a reconcile needs of a
// render when nothing is to be committed: the bundle without its files
// (digest, objects, sync object, read-back). A Workload waiting for its
// applier is reconciled every poll interval; rendering is a pure function
// of its input, so a poll whose input did not change skips the render. The
// key is a hash of everything the engine is given; only the Publisher's
// built-in engine is memoized (catalog engines come and go).
type renderMemo struct {
	mu    sync.Mutex
	order *list.List // of memoEntry, most recent first
	byKey map[[32]byte]*list.Element
}

type memoEntry struct {
	key     [32]byte
	summary *render.Bundle
}

// workloadKey hashes a Workload render's input. The Workload's status is
// not part of it (render does not read it: the split is Traffic and
// Stable), nor are its resourceVersion and managedFields, which change
// with every status patch.
func workloadKey(in render.WorkloadInput) ([32]byte, bool) {
	w := *in.Workload
	w.Status = scribev1.WorkloadStatus{}
	w.ResourceVersion, w.ManagedFields = "", nil
	in.Workload = &w
	data, err := json.Marshal(in)
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(data), true
}

// get returns the summary of the render of key, or nil.
func (m *renderMemo) get(key [32]byte) *render.Bundle {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byKey == nil {
		return nil
	}
	el, ok := m.byKey[key]
	if !ok {
		return nil
	}
	m.order.MoveToFront(el)
	return el.Value.(memoEntry).summary
}

// put remembers the summary of b, the render of key.
func (m *renderMemo) put(key [32]byte, b *render.Bundle) {
	s := *b
	s.Files = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byKey == nil {
		m.byKey, m.order = map[[32]byte]*list.Element{}, list.New()
	}
	if el, ok := m.byKey[key]; ok {
		el.Value = memoEntry{key: key, summary: &s}
		m.order.MoveToFront(el)
		return
	}
	m.byKey[key] = m.order.PushFront(memoEntry{key: key, summary: &s})
	for m.order.Len() > renderMemoSize {
		last := m.order.Back()
		delete(m.byKey, last.Value.(memoEntry).key)
		m.order.Remove(last)
	}
}
