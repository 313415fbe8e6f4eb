package forge

import (
	"strings"
	"testing"
)

// TestCloseClosesAnOpenPullRequestWithItsNote: Close closes an open pull
// request in one write, its note first in the description; a pull request
// already closed or merged is returned as it is, with no write.
func TestCloseClosesAnOpenPullRequestWithItsNote(t *testing.T) {
	for _, pc := range providers() {
		t.Run(pc.provider, func(t *testing.T) {
			f := pc.start(t)
			c := newClient(t, pc.provider, f)
			ctx := t.Context()

			open, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: step 2 of 3", Body: "traffic 30%"})
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			before := writes(f.Requests())
			closed, err := c.Close(ctx, open.Number, "Superseded by the rollback committed as abc123.")
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
			if closed.Number != open.Number || closed.State != StateClosed || closed.MergeCommit != "" {
				t.Fatalf("Close = %+v, want #%d closed", closed, open.Number)
			}
			if want := "Superseded by the rollback committed as abc123.\n\ntraffic 30%"; closed.Body != want {
				t.Errorf("description %q, want %q", closed.Body, want)
			}
			if n := writes(f.Requests()) - before; n != 1 {
				t.Errorf("Close sent %d writes, want 1", n)
			}
			if prs := f.PullRequests(); len(prs) != 1 || !strings.EqualFold(string(prs[0].State), "closed") {
				t.Errorf("the forge holds %+v, want the pull request closed", prs)
			}

			// Closed already: nothing is written.
			before = writes(f.Requests())
			again, err := c.Close(ctx, open.Number, "again")
			if err != nil || again.State != StateClosed || writes(f.Requests()) != before {
				t.Errorf("closing a closed pull request: %+v, %v, %d writes", again, err, writes(f.Requests())-before)
			}

			// Merged: it stays merged.
			second, err := c.Ensure(ctx, Request{Head: head, Base: base, Title: "web: step 3 of 3", Body: "traffic 100%"})
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			f.Merge(second.Number, "0123456789abcdef0123456789abcdef01234567")
			before = writes(f.Requests())
			merged, err := c.Close(ctx, second.Number, "too late")
			if err != nil || merged.State != StateMerged || writes(f.Requests()) != before {
				t.Errorf("closing a merged pull request: %+v, %v, %d writes", merged, err, writes(f.Requests())-before)
			}

			if _, err := c.Close(ctx, 0, "x"); err == nil {
				t.Error("Close(0) did not fail")
			}
		})
	}
}
