package controller

import "time"

// SetMetricsClock makes m read the time from now, for the tests of the
// step durations.
func SetMetricsClock(m *Metrics, now func() time.Time) { m.state.now = now }
