package health

import (
	"log/slog"
	"sync"
	"time"
)

// maxEvents bounds the log: the oldest transitions go first.
const maxEvents = 1000

// Event is a transition of a check's state.
type Event struct {
	Time   time.Time
	Check  string
	From   string // "healthy" or "unhealthy"
	To     string
	Reason string // ReasonName of the new state's reason
	Detail string // the last result's detail, if any
}

// EventLog is the health-check log: the last transitions, also written to
// the process log as they happen. The zero value is ready; its methods are
// safe for concurrent use.
type EventLog struct {
	mu     sync.Mutex
	events []Event
}

// Add records a transition.
func (l *EventLog) Add(ev Event) {
	l.mu.Lock()
	if len(l.events) == maxEvents {
		l.events = append(l.events[:0], l.events[1:]...)
	}
	l.events = append(l.events, ev)
	l.mu.Unlock()
	slog.Info("health transition", "check", ev.Check, "from", ev.From, "to", ev.To, "reason", ev.Reason, "detail", ev.Detail)
}

// Events returns the recent transitions, oldest first.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Restore puts transitions logged before, such as a previous run's,
// before the ones logged since, oldest first; the oldest beyond the log's
// bound are dropped. They are not logged again.
func (l *EventLog) Restore(earlier []Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := append(append([]Event(nil), earlier...), l.events...)
	l.events = all[max(0, len(all)-maxEvents):]
}
