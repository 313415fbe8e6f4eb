package ocisink

import (
	"context"
	"fmt"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
)

// BenchmarkPublishOCI publishes 100 bundles to an in-process registry per
// iteration, with new content each time so that every iteration pushes:
// "batch" in one Publish call, "each" in one call per bundle.
func BenchmarkPublishOCI(b *testing.B) {
	const n = 100
	changes := func(iter int) []publish.Change {
		cs := make([]publish.Change, n)
		for i := range cs {
			cs[i] = publish.ChangeFor(workload("bench", fmt.Sprintf("w%03d", i), fmt.Sprint(iter)))
		}
		return cs
	}
	ctx := context.Background()
	b.Run("batch", func(b *testing.B) {
		s := newSink(b, Options{URL: newRegistry(b, "", "").url("bench")})
		b.ReportAllocs()
		for iter := 0; b.Loop(); iter++ {
			if _, err := s.Publish(ctx, changes(iter)...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("each", func(b *testing.B) {
		s := newSink(b, Options{URL: newRegistry(b, "", "").url("bench")})
		b.ReportAllocs()
		for iter := 0; b.Loop(); iter++ {
			for _, c := range changes(iter) {
				if _, err := s.Publish(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
