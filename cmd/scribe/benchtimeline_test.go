package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scribev1 "github.com/scribe-gitops/scribe/api/v1alpha1"
	"github.com/scribe-gitops/scribe/controller"
)

// burstTimeline records, per Workload of a burst, when its creation
// returned, when the controller first wrote it (a resourceVersion after
// its creation's: the finalizer, or with the finalizer policy its first
// status) and when its status first named a commit, watched from the API
// server. Its report says where the time between the last creation
// and the last commit goes.
type burstTimeline struct {
	start time.Time
	mu    sync.Mutex
	made  map[string]time.Time
	// madeRV is each creation's resourceVersion.
	madeRV map[string]string
	done   map[string]time.Time
	// writes holds, per Workload, when each resourceVersion up to its
	// commit was first seen (its creation's included); the first write by
	// the controller is the earliest but the creation's, worked out in
	// report (the watch may show a write before its creation returns).
	writes map[string]map[string]time.Time
	stop   context.CancelFunc
}

// watchBurst starts watching ns's Workloads.
func watchBurst(b *testing.B, cfg *rest.Config, ns string) *burstTimeline {
	scheme, err := controller.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tl := &burstTimeline{made: map[string]time.Time{}, madeRV: map[string]string{}, done: map[string]time.Time{}, writes: map[string]map[string]time.Time{}, stop: cancel}
	// The API server closes a watch whose reader falls behind a burst:
	// then the list catches up and a new watch goes on from it.
	rv, err := tl.list(ctx, c, ns)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &scribev1.WorkloadList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err == nil {
				for ev := range w.ResultChan() {
					if wl, ok := ev.Object.(*scribev1.Workload); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
						tl.observe(wl)
					}
				}
				w.Stop()
			} else {
				time.Sleep(100 * time.Millisecond) // not a busy loop while the API server refuses
			}
			if ctx.Err() != nil {
				return
			}
			if next, err := tl.list(ctx, c, ns); err == nil {
				rv = next
			}
		}
	}()
	return tl
}

// list observes every Workload of ns and returns the list's
// resourceVersion.
func (tl *burstTimeline) list(ctx context.Context, c client.Client, ns string) (string, error) {
	list := &scribev1.WorkloadList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return "", err
	}
	for i := range list.Items {
		tl.observe(&list.Items[i])
	}
	return list.ResourceVersion, nil
}

// observe records what wl shows now.
func (tl *burstTimeline) observe(wl *scribev1.Workload) {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, committed := tl.done[wl.Name]; !committed {
		if tl.writes[wl.Name] == nil {
			tl.writes[wl.Name] = map[string]time.Time{}
		}
		if _, seen := tl.writes[wl.Name][wl.ResourceVersion]; !seen {
			tl.writes[wl.Name][wl.ResourceVersion] = now
		}
	}
	if _, seen := tl.done[wl.Name]; !seen && wl.Status.Revision != "" {
		tl.done[wl.Name] = now
	}
}

// begin sets the burst's start.
func (tl *burstTimeline) begin(start time.Time) {
	tl.mu.Lock()
	tl.start = start
	tl.mu.Unlock()
}

// created records that name's creation returned, at resourceVersion rv.
func (tl *burstTimeline) created(name, rv string) {
	now := time.Now()
	tl.mu.Lock()
	tl.made[name] = now
	tl.madeRV[name] = rv
	tl.mu.Unlock()
}

// committed is how many Workloads have shown a commit in their status.
func (tl *burstTimeline) committed() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.done)
}

// report stops the watch and summarizes: the last creation, first write
// and commit after the burst's start, and per Workload the time from its
// creation to its first write and to its commit (median, 90th
// percentile, max).
func (tl *burstTimeline) report() string {
	tl.stop()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	last := func(m map[string]time.Time) time.Duration {
		var d time.Duration
		for _, t := range m {
			d = max(d, t.Sub(tl.start))
		}
		return d.Round(10 * time.Millisecond)
	}
	spread := func(m map[string]time.Time) string {
		var ds []time.Duration
		for name, t := range m {
			if c, ok := tl.made[name]; ok {
				ds = append(ds, t.Sub(c))
			}
		}
		if len(ds) == 0 {
			return "none"
		}
		slices.Sort(ds)
		at := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1))].Round(10 * time.Millisecond) }
		return fmt.Sprintf("median %s, p90 %s, max %s", at(0.5), at(0.9), at(1))
	}
	first := map[string]time.Time{}
	var writes []int
	for name, rvs := range tl.writes {
		writes = append(writes, len(rvs))
		for rv, at := range rvs {
			if made, ok := tl.madeRV[name]; ok && rv != made && (first[name].IsZero() || at.Before(first[name])) {
				first[name] = at
			}
		}
	}
	slices.Sort(writes)
	perCR := "none"
	if len(writes) > 0 {
		perCR = fmt.Sprintf("median %d, max %d", writes[len(writes)/2], writes[len(writes)-1])
	}
	return fmt.Sprintf("timeline from the burst's start: last created +%s, last first write by the controller +%s, last committed +%s; per Workload, created → first write: %s; created → committed: %s; writes seen up to its commit, its creation included: %s",
		last(tl.made), last(first), last(tl.done), spread(first), spread(tl.done), perCR)
}
