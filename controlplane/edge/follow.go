package edge

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// follower picks the aggregator whose tables an edge writes: it stays with
// one while that one's tables keep arriving, so two aggregators that
// disagree for a moment do not make answers flip between them, and moves
// to another only after timeout without a table.
type follower struct {
	timeout time.Duration

	mu       sync.Mutex
	current  string
	last     time.Time
	switches atomic.Uint64
}

// take reports whether a table from sender, arriving at now, is the one to
// write.
func (f *follower) take(sender string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sender != f.current {
		if f.current != "" && now.Sub(f.last) <= f.timeout {
			return false
		}
		if f.current != "" {
			f.switches.Add(1)
			slog.Warn("following another aggregator", "from", f.current, "to", sender, "silent_for", now.Sub(f.last).Round(time.Millisecond))
		} else {
			slog.Info("following aggregator", "aggregator", sender)
		}
		f.current = sender
	}
	f.last = now
	return true
}

// following is the aggregator followed now, or "".
func (f *follower) following() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current
}
