package controller

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/scribe-gitops/scribe/render"
)

// queues builds waiting namespaces: each string is one namespace's
// waiters in order, h a heavy render and l a light one.
func queues(spec ...string) []*slotQueue {
	var qs []*slotQueue
	for i, s := range spec {
		q := &slotQueue{namespace: string(rune('a' + i))}
		for _, c := range s {
			q.waiters = append(q.waiters, &slotWaiter{heavy: c == 'h'})
		}
		qs = append(qs, q)
	}
	return qs
}

func TestPickWaiterTakesNamespacesInTurnAndKeepsASlotFromHeavyRenders(t *testing.T) {
	for _, tc := range []struct {
		name      string
		queues    []*slotQueue
		next      int
		heavyFree int
		wantQ     int
		wantW     int
		wantOK    bool
	}{
		{"nobody waits", nil, 0, 1, 0, 0, false},
		{"the namespace whose turn it is first", queues("ll", "l"), 1, 1, 1, 0, true},
		{"the turn wraps around", queues("l", "l"), 2, 1, 0, 0, true},
		{"first come first in a namespace", queues("hl"), 0, 1, 0, 0, true},
		{"a light render passes a heavy one when heavy slots are full", queues("hl"), 0, 0, 0, 1, true},
		{"another namespace's light render when the turn's has only heavy ones", queues("hh", "l"), 0, 0, 1, 0, true},
		{"heavy renders wait while heavy slots are full", queues("hh", "h"), 0, 0, 0, 0, false},
		{"a heavy render of the namespace whose turn it is", queues("h", "h"), 1, 1, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, w, ok := pickWaiter(tc.queues, tc.next, tc.heavyFree)
			if ok != tc.wantOK || (ok && (q != tc.wantQ || w != tc.wantW)) {
				t.Errorf("pickWaiter = (%d, %d, %t), want (%d, %d, %t)", q, w, ok, tc.wantQ, tc.wantW, tc.wantOK)
			}
		})
	}
}

// acquireAsync asks for a slot for namespace ns and returns a channel
// that receives its release once granted; it returns once the request is
// queued or granted.
func acquireAsync(t *testing.T, s *renderSlots, ns string, heavy bool) <-chan func() {
	t.Helper()
	before := waiters(s, ns)
	ch := make(chan func(), 1)
	go func() {
		r, err := s.acquire(context.Background(), ns, heavy)
		if err != nil {
			t.Error(err)
			return
		}
		ch <- r
	}()
	for waiters(s, ns) == before && len(ch) == 0 {
		runtime.Gosched()
	}
	return ch
}

// waiters is the number of renders of ns waiting for a slot.
func waiters(s *renderSlots, ns string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		if q.namespace == ns {
			return len(q.waiters)
		}
	}
	return 0
}

// One tenant's heavy render leaves a slot: another tenant's light render
// takes it while the first tenant's next heavy render waits.
func TestRenderSlotsKeepASlotFromHeavyRenders(t *testing.T) {
	s := newRenderSlots(2)
	ctx := context.Background()
	heavy, err := s.acquire(ctx, "a", true)
	if err != nil {
		t.Fatal(err)
	}
	second := acquireAsync(t, s, "a", true)
	if len(second) != 0 {
		t.Fatal("a second heavy render took the last slot")
	}
	light, err := s.acquire(ctx, "b", false)
	if err != nil {
		t.Fatal(err)
	}
	heavy()
	(<-second)()
	light()
}

// With one slot, a tenant with three renders waiting and another with
// one take turns: the other's render runs after at most one of the
// first's.
func TestRenderSlotsServeNamespacesInTurn(t *testing.T) {
	s := newRenderSlots(1)
	hold, err := s.acquire(context.Background(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	type req struct {
		name string
		ch   <-chan func()
	}
	reqs := []req{{"a1", acquireAsync(t, s, "a", false)}, {"a2", acquireAsync(t, s, "a", false)}, {"a3", acquireAsync(t, s, "a", false)}, {"b1", acquireAsync(t, s, "b", false)}}
	hold()
	for range reqs {
		var got req
		for got.ch == nil {
			for _, r := range reqs {
				if len(r.ch) > 0 {
					got = r
				}
			}
			runtime.Gosched()
		}
		order = append(order, got.name)
		(<-got.ch)()
	}
	if got, want := strings.Join(order, " "), "a1 b1 a2 a3"; got != want {
		t.Errorf("slots granted in order %s, want %s", got, want)
	}
}

// A render whose context ends while it waits leaves the queue; one
// granted as its context ended hands the slot on.
func TestRenderSlotsForgetAWaiterWhoseContextEnded(t *testing.T) {
	s := newRenderSlots(1)
	hold, err := s.acquire(context.Background(), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.acquire(ctx, "b", false)
		done <- err
	}()
	for waiters(s, "b") == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire = %v, want the context's error", err)
	}
	s.mu.Lock()
	waiting := len(s.queues)
	s.mu.Unlock()
	if waiting != 0 {
		t.Errorf("%d namespaces still wait after the only waiter gave up", waiting)
	}
	hold()
	again, err := s.acquire(context.Background(), "c", false)
	if err != nil {
		t.Fatal(err)
	}
	again()
}

// A reconcile whose context ends returns while the render (which CUE
// cannot interrupt) goes on; its slot is freed when the render returns.
func TestRunRenderReturnsOnCancellationAndFreesTheSlotWhenTheRenderEnds(t *testing.T) {
	p := &Publisher{}
	s := newRenderSlots(1)
	release, err := s.acquire(context.Background(), "a", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	unblock := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		_, err := p.runRender(ctx, nil, release, func(context.Context, *render.Engine) (*render.Bundle, error) {
			<-unblock // an evaluation that ignores its context
			return &render.Bundle{}, nil
		})
		ended <- err
	}()
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("runRender = %v, want the context's error while the render runs", err)
	}
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if running != 1 {
		t.Errorf("the abandoned render's slot was freed before it ended (%d running)", running)
	}
	close(unblock)
	next, err := s.acquire(context.Background(), "b", false)
	if err != nil {
		t.Fatal(err)
	}
	next()
}
