package e2e

import (
	"sync"
	"testing"

	"github.com/scribe-gitops/scribe/internal/publish/publishtest"
)

// scenario is one scenario of a loop several scenarios share.
type scenario struct {
	name string
	run  func(*testing.T, *Stack)
}

// runTogether runs scenarios as subtests of t on the one loop s, all at
// once. They are not parallel subtests: those would wait for a -parallel
// slot while the loops queued for the real node hold every slot, so the
// loop would sit idle; t.Run from several goroutines runs them at once
// inside t's own slot.
func runTogether(t *testing.T, s *Stack, scenarios ...scenario) {
	t.Helper()
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
		}()
	}
	wg.Wait()
}

// appliedIncludes reports whether applied, a revision the applier applied,
// is rev or a later commit of the loop's branch. In a loop scenarios
// share, the others' commits land after rev and the applier applies the
// newest, so "applied rev" means rev is an ancestor of what was applied.
func appliedIncludes(t *testing.T, s *Stack, applied, rev string) bool {
	t.Helper()
	if applied == rev {
		return true
	}
	if applied == "" || rev == "" {
		return false
	}
	repo := t.TempDir()
	publishtest.Git(t, "", "clone", "--quiet", "--bare", s.RepoURL, repo)
	_, err := publishtest.RunGit(repo, "merge-base", "--is-ancestor", rev, applied)
	return err == nil
}
