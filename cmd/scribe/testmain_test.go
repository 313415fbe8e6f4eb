package main

import (
	"os"
	"testing"
)

// TestMain lets tests re-execute this test binary as the whole CLI (main,
// signals included) when envRunMain is set, for the tests that drive a real
// process. (As the bounded catalog checker the binary is served by render's
// init, before TestMain.)
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}
