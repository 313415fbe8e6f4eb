package controller

// Artifact builds a Flux artifact (tar.gz) of files and its digest, for the
// envtest tests of package controller_test.
var Artifact = artifact

// RenderSlots reports the renders p runs (heavy ones among them) and
// those waiting for a slot, for the fairness tests.
func RenderSlots(p *Publisher) (running, heavy, waiting int) {
	s := p.renderSlots
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		waiting += len(q.waiters)
	}
	return s.running, s.heavyRunning, waiting
}
