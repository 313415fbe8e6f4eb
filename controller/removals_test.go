package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestDecidePublishRefusesWritesAfterTheRemoval: a removal is always
// published; a write is not once the removal was published, nor when the
// API server has no such object, another object of that name, or the
// object being deleted, whatever the reconcile's (cached) view said.
func TestDecidePublishRefusesWritesAfterTheRemoval(t *testing.T) {
	const uid = types.UID("1111")
	live := LiveObject{Known: true, Found: true, UID: uid}
	deleting := live
	deleting.Deleting = true
	for _, tt := range []struct {
		name string
		f    PublishFacts
		ok   bool
		why  string
	}{
		{"a write of a live object", PublishFacts{UID: uid, Live: live}, true, ""},
		{"a write, the object not read (no uncached reader)", PublishFacts{UID: uid}, true, ""},
		{"a write of an object of unknown UID", PublishFacts{Live: live}, true, ""},
		{"a removal", PublishFacts{UID: uid, Delete: true, Live: deleting}, true, ""},
		{"a removal again, after the removal", PublishFacts{UID: uid, Delete: true, Removed: true}, true, ""},
		{"a write after the removal was published", PublishFacts{UID: uid, Removed: true, Live: live}, false, "removal was published"},
		{"a write of an object being deleted", PublishFacts{UID: uid, Live: deleting}, false, "being deleted"},
		{"a write of an object that is gone", PublishFacts{UID: uid, Live: LiveObject{Known: true}}, false, "no longer exists"},
		{"a write of an object deleted and made again under its name", PublishFacts{UID: uid, Live: LiveObject{Known: true, Found: true, UID: "2222"}}, false, "was deleted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := DecidePublish(tt.f)
			if ok != tt.ok || !strings.Contains(why, tt.why) {
				t.Fatalf("DecidePublish = %v, %q; want %v and a reason with %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}

// TestAWriteAnswerStandsInForTheLiveReadOnlyWhenTheFinalizerHoldsTheObject:
// the answer to the reconcile's own write spares the uncached read only
// when it is the object read, not being deleted, and holds Scribe's
// finalizer (so its removal must come through Scribe, after the write).
func TestAWriteAnswerStandsInForTheLiveReadOnlyWhenTheFinalizerHoldsTheObject(t *testing.T) {
	const uid = types.UID("1111")
	held := LiveObject{Known: true, Found: true, UID: uid, Finalized: true}
	with := func(f func(*LiveObject)) LiveObject { o := held; f(&o); return o }
	for _, tt := range []struct {
		name    string
		uid     types.UID
		written LiveObject
		want    bool
	}{
		{"the finalizer just written", uid, held, true},
		{"no write in this reconcile", uid, LiveObject{}, false},
		{"the object read has no known UID", "", held, false},
		{"the answer is another object of that name", uid, with(func(o *LiveObject) { o.UID = "2222" }), false},
		{"the answer shows a deletion", uid, with(func(o *LiveObject) { o.Deleting = true }), false},
		{"the answer has no Scribe finalizer", uid, with(func(o *LiveObject) { o.Finalized = false }), false},
		{"the answer says it is gone", uid, LiveObject{Known: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeWitnesses(tt.uid, tt.written); got != tt.want {
				t.Fatalf("writeWitnesses = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPublishOrderRunsOneObjectsPublishesOneAtATime: a publish of an
// object waits for the one in flight (its removal waits for a write's
// commit); other objects do not wait; a removal leaves a tombstone.
func TestPublishOrderRunsOneObjectsPublishesOneAtATime(t *testing.T) {
	var o publishOrder
	unlock := o.lock("a")
	got := make(chan string, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer o.lock("a")()
		got <- "a, second"
	}()
	func() {
		defer o.lock("b")()
		got <- "b"
	}()
	if first := <-got; first != "b" {
		t.Fatalf("%s went first; another object's publish waited, or one of a's did not", first)
	}
	got <- "a, first"
	unlock()
	if a1, a2 := <-got, <-got; a1 != "a, first" || a2 != "a, second" {
		t.Fatalf("a's publishes ran as %q, %q", a1, a2)
	}
	<-done
	if o.isRemoved("a") {
		t.Fatal("a tombstone without a removal")
	}
	o.markRemoved("a", time.Now())
	if !o.isRemoved("a") || o.isRemoved("b") {
		t.Fatal("the removal of a left no tombstone of a alone")
	}
	o.lock("a")()
	if len(o.locks) != 0 {
		t.Fatalf("locks kept after use: %v", o.locks)
	}
}
