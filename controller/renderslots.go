package controller

import (
	"context"
	"sync"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
)

// heavyRenderObjects is the size, in objects rendered, above which an
// Experiment's render is heavy (renderCost): such renders may hold all
// the render slots but one, which is left to the others.
const heavyRenderObjects = 64

// experimentRenderCost estimates the objects an Experiment renders: a
// cluster and its wiring per target and a delivery per component. The
// evaluation's time grows faster than this count (measured: 8 targets × 8
// components ~0.9 s, 16 × 8 ~2.8 s on two shared cores).
func experimentRenderCost(spec *scribev1.ExperimentSpec) int {
	n := 0
	for _, t := range spec.Targets {
		n += 1 + len(t.Components)
	}
	return n
}

// renderSlots bounds the renders that run at once (size) and shares them
// fairly between namespaces, that is between tenants: a freed slot goes
// to the namespaces with a render waiting in turn (pickWaiter), so a
// tenant with many renders waiting delays another's by at most one render
// of its own per turn; and heavy renders (a large Experiment's, whose
// CUE evaluation cannot be interrupted) hold at most heavyMax slots, so
// at least one slot stays for the others' light renders (Workloads and
// small Experiments) whatever the heavy ones cost.
type renderSlots struct {
	size, heavyMax int

	mu                    sync.Mutex
	running, heavyRunning int
	// queues are the namespaces with a render waiting, in turn order;
	// next is the index of the namespace whose turn it is.
	queues []*slotQueue
	next   int
}

// slotQueue is one namespace's waiting renders, first come first.
type slotQueue struct {
	namespace string
	waiters   []*slotWaiter
}

// slotWaiter is one render waiting for a slot; ready is closed when the
// slot is granted.
type slotWaiter struct {
	heavy   bool
	granted bool
	ready   chan struct{}
}

// newRenderSlots allows size renders at once, all but one of them heavy
// (all, when size is 1).
func newRenderSlots(size int) *renderSlots {
	return &renderSlots{size: size, heavyMax: max(1, size-1)}
}

// pickWaiter decides who gets a free slot: the namespaces take turns,
// starting with queues[next]; in a namespace the first waiter that may
// run gets it: a light one always, a heavy one only while heavyFree > 0.
// It returns the namespace's index and the waiter's, or ok false when no
// one waiting may run.
func pickWaiter(queues []*slotQueue, next, heavyFree int) (q, w int, ok bool) {
	for i := range queues {
		q := (next + i) % len(queues)
		for w, wt := range queues[q].waiters {
			if !wt.heavy || heavyFree > 0 {
				return q, w, true
			}
		}
	}
	return 0, 0, false
}

// acquire waits for a slot for a render in namespace (heavy or not) and
// returns its release, or ctx's error when ctx ends first.
func (s *renderSlots) acquire(ctx context.Context, namespace string, heavy bool) (release func(), err error) {
	wt := &slotWaiter{heavy: heavy, ready: make(chan struct{})}
	s.mu.Lock()
	s.enqueue(namespace, wt)
	s.dispatch()
	s.mu.Unlock()
	release = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.running--
		if heavy {
			s.heavyRunning--
		}
		s.dispatch()
	}
	select {
	case <-wt.ready:
		return release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	granted := wt.granted
	if !granted {
		s.remove(namespace, wt)
	}
	s.mu.Unlock()
	if granted {
		release() // granted while ctx ended: handed on
	}
	return nil, ctx.Err()
}

// enqueue adds wt to its namespace's queue, the namespace last in turn
// when it had none waiting.
func (s *renderSlots) enqueue(namespace string, wt *slotWaiter) {
	for _, q := range s.queues {
		if q.namespace == namespace {
			q.waiters = append(q.waiters, wt)
			return
		}
	}
	s.queues = append(s.queues, &slotQueue{namespace: namespace, waiters: []*slotWaiter{wt}})
}

// dispatch grants the free slots (s.mu held).
func (s *renderSlots) dispatch() {
	for s.running < s.size {
		q, w, ok := pickWaiter(s.queues, s.next, s.heavyMax-s.heavyRunning)
		if !ok {
			return
		}
		wt := s.queues[q].waiters[w]
		wt.granted = true
		close(wt.ready)
		s.running++
		if wt.heavy {
			s.heavyRunning++
		}
		// The turn passes to the namespace after q: q's index when q has
		// no render waiting any more and leaves the turn.
		s.next = q + 1
		if s.drop(q, w) {
			s.next = q
		}
		if len(s.queues) > 0 {
			s.next %= len(s.queues)
		}
	}
}

// remove takes wt, which ctx gave up, out of its namespace's queue (s.mu
// held).
func (s *renderSlots) remove(namespace string, wt *slotWaiter) {
	for q, sq := range s.queues {
		if sq.namespace != namespace {
			continue
		}
		for w, x := range sq.waiters {
			if x == wt {
				if s.drop(q, w) && s.next > q {
					s.next--
				}
				if len(s.queues) > 0 {
					s.next %= len(s.queues)
				}
				return
			}
		}
	}
}

// drop removes waiter w of queues[q], and the namespace from the turn when
// it has none left; it reports whether it did (s.mu held).
func (s *renderSlots) drop(q, w int) bool {
	sq := s.queues[q]
	sq.waiters = append(sq.waiters[:w], sq.waiters[w+1:]...)
	if len(sq.waiters) > 0 {
		return false
	}
	s.queues = append(s.queues[:q], s.queues[q+1:]...)
	return true
}
