package gitsink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish"
)

func TestStorePanicBecomesAnErrorDropsTheCacheAndRetriesOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fail is what the nth call (0-based) of fn does: "panic", "corrupt"
		// (a CacheCorrupt error), "other" (any other error) or "" (succeed).
		fail       []string
		wantCalls  int
		wantReason publish.Reason // "" for success
		wantReset  bool
	}{
		{"a panic is recovered, the cache dropped and the retry succeeds", []string{"panic", ""}, 2, "", true},
		{"a panic twice is an InternalError, not a crash", []string{"panic", "panic"}, 2, publish.ReasonInternal, true},
		{"a damaged cache is dropped and the retry succeeds", []string{"corrupt", ""}, 2, "", true},
		{"a damaged fresh cache too is CacheCorrupt", []string{"corrupt", "corrupt"}, 2, publish.ReasonCacheCorrupt, true},
		{"another failure is returned at once, the cache kept", []string{"other"}, 1, publish.ReasonUnreachable, false},
		{"success runs once", []string{""}, 1, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(t.TempDir())
			ls, err := g.store("https://git.example.com/team/gitops.git")
			if err != nil {
				t.Fatal(err)
			}
			// Open the cache, then mark it: a dropped cache loses the mark.
			if err := ls.do(context.Background(), nil, func(context.Context, *gitStore) error { return nil }); err != nil {
				t.Fatal(err)
			}
			mark := filepath.Join(ls.dir, "scribe-test-mark")
			if err := os.WriteFile(mark, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			calls := 0
			err = ls.do(context.Background(), nil, func(_ context.Context, st *gitStore) error {
				n := calls
				calls++
				switch tc.fail[n] {
				case "panic":
					// as a damaged pack makes go-git do (a nil map write)
					panic(errors.New("assignment to entry in nil map"))
				case "corrupt":
					return st.corrupt(errors.New("read tree 1234: object not found"))
				case "other":
					return &publish.Error{Reason: publish.ReasonUnreachable, Op: "fetch from", URL: st.display, Err: errors.New("connection refused")}
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tc.wantCalls)
			}
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("do = %v, want success", err)
				}
			} else {
				var pe *publish.Error
				if !errors.As(err, &pe) || pe.Reason != tc.wantReason {
					t.Fatalf("do = %v (reason %s), want an *Error with reason %s", err, publish.ReasonOf(err), tc.wantReason)
				}
			}
			_, statErr := os.Stat(mark)
			if reset := errors.Is(statErr, os.ErrNotExist); reset != tc.wantReset {
				t.Errorf("cache dropped = %v, want %v", reset, tc.wantReset)
			}
			// Whatever happened, the store is usable again.
			if err := ls.do(context.Background(), nil, func(context.Context, *gitStore) error { return nil }); err != nil {
				t.Fatalf("the store after the failure: %v", err)
			}
		})
	}
}
