package gitsink

import (
	"testing"
	"time"
)

// TestRetryLimitsDoubleUpToTheirCap: the range a commit's retry waits in
// doubles with each try from twice the base, stops doubling after 2^10
// times the base, and never exceeds two seconds.
func TestRetryLimitsDoubleUpToTheirCap(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		base time.Duration
		want []time.Duration
	}{
		{base: 50 * ms, want: []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms, 2000 * ms, 2000 * ms, 2000 * ms, 2000 * ms}},
		{base: ms, want: []time.Duration{2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 128 * ms, 256 * ms, 512 * ms, 1024 * ms, 1024 * ms, 1024 * ms}},
		{base: 1500 * ms, want: []time.Duration{2000 * ms, 2000 * ms, 2000 * ms}},
	} {
		limit := retryLimits(tc.base)
		for i, want := range tc.want {
			if got := limit(); got != want {
				t.Errorf("base %s, try %d: limit %s, want %s", tc.base, i+2, got, want)
			}
		}
		delay := retryDelay(tc.base)
		for i := range tc.want {
			if d := delay(); d < ms || d > tc.want[i]+ms {
				t.Errorf("base %s, try %d: delay %s outside [1ms, %s]", tc.base, i+2, d, tc.want[i]+ms)
			}
		}
	}
}
