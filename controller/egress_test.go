package controller_test

import "github.com/scribe-gitops/scribe/internal/egress"

// testEgress is the egress allowance of a platform whose tenants'
// endpoints are on loopback: every test server listens on 127.0.0.1.
func testEgress() egress.Policy {
	return egress.Policy{AllowLoopback: true}
}
