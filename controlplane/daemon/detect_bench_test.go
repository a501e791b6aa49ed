package daemon_test

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkDetection measures, over trials, the time from a backend's
// death (its HTTP server closed) to the XDP answer dropping it, and from
// its restart to the answer taking it back. Checks every interval,
// unhealthy after 3 failures, healthy after 2 successes, a push every
// push.
//
//	go test ./controlplane/daemon -run '^$' -bench Detection -benchtime 1x
func BenchmarkDetection(b *testing.B) {
	const (
		interval = 250 * time.Millisecond
		push     = 250 * time.Millisecond
		trials   = 20
	)
	e, backends := healthEdge(b, interval, push, 3, 2)
	both := []string{"198.18.1.1", "198.18.1.2"}
	waitAnswer(b, e, "startup", both, 3*time.Second)
	var down, up []time.Duration
	for range b.N {
		for range trials {
			time.Sleep(3 * interval)
			backends[0].stop()
			down = append(down, waitAnswer(b, e, "death", []string{"198.18.1.2"}, 5*time.Second))
			time.Sleep(interval)
			backends[0].start(b)
			up = append(up, waitAnswer(b, e, "recovery", both, 5*time.Second))
		}
	}
	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1)+0.5)].Seconds() * 1000
	}
	b.ReportMetric(pct(down, 0.5), "death-p50-ms")
	b.ReportMetric(pct(down, 0.99), "death-p99-ms")
	b.ReportMetric(pct(up, 0.5), "recovery-p50-ms")
	b.ReportMetric(pct(up, 0.99), "recovery-p99-ms")
	b.ReportMetric(float64(len(down)), "trials")
}
