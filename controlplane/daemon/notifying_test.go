package daemon

import (
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// TestPublishedBefore: an aggregator leaves a change to the webhooks when
// one ranked before it published the same change within the holdoff, and
// posts it otherwise.
func TestPublishedBefore(t *testing.T) {
	at := time.Unix(1000, 0)
	var h heardLog
	h.add(0, health.Event{Check: "web1", To: health.StateUnhealthy, Time: at})
	h.add(2, health.Event{Check: "web2", To: health.StateUnhealthy, Time: at})
	window := 2 * time.Second
	for _, tc := range []struct {
		name  string
		rank  int
		ev    health.Event
		skips bool
	}{
		{"rank 0 heard", 1, health.Event{Check: "web1", To: health.StateUnhealthy, Time: at.Add(time.Second)}, true},
		{"judged a period earlier", 1, health.Event{Check: "web1", To: health.StateUnhealthy, Time: at.Add(-time.Second)}, true},
		{"the other direction", 1, health.Event{Check: "web1", To: health.StateHealthy, Time: at}, false},
		{"another check", 1, health.Event{Check: "db", To: health.StateUnhealthy, Time: at}, false},
		{"beyond the holdoff", 1, health.Event{Check: "web1", To: health.StateUnhealthy, Time: at.Add(3 * time.Second)}, false},
		{"the first ranked posts", 0, health.Event{Check: "web1", To: health.StateUnhealthy, Time: at}, false},
		{"heard from one ranked after", 1, health.Event{Check: "web2", To: health.StateUnhealthy, Time: at}, false},
		{"heard from one ranked before", 3, health.Event{Check: "web2", To: health.StateUnhealthy, Time: at}, true},
	} {
		if got := h.has(tc.rank, &tc.ev, window); got != tc.skips {
			t.Errorf("%s: skipped %v, want %v", tc.name, got, tc.skips)
		}
	}
}
