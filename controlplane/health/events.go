package health

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxEvents bounds the log: the oldest transitions go first.
const maxEvents = 1000

// The states an Event goes between.
const (
	StateHealthy   = "healthy"
	StateUnhealthy = "unhealthy"
)

// Event is a transition of a check's state.
type Event struct {
	Time   time.Time
	Check  string
	From   string // StateHealthy or StateUnhealthy
	To     string
	Reason string // ReasonName of the new state's reason
	Detail string // the last result's detail, if any
	// Region is a traffic shift's region, whose events go between
	// ShiftServing and ShiftShifted; Check is "" then.
	Region string `json:",omitempty"`

	// Set by the log's handler (EventLog.Handle) where the host knows
	// them, or as received from the aggregator that judged it.
	ID      string   // the same on every aggregator that judged it in the same push period
	Records []string // names of the record sets whose answers use the check
	Host    string   // the aggregator that judged it
	Cell    string   // the check's cell
}

// Filter selects events; a zero field selects every event.
type Filter struct {
	Checks  []string // any of these check ids
	Records []string // any of these record names, fully qualified, lowercase
	To      string   // StateHealthy (up) or StateUnhealthy (down)
	Since   time.Time
	Until   time.Time // exclusive
}

// Match reports whether ev is one f selects.
func (f *Filter) Match(ev *Event) bool {
	switch {
	case len(f.Checks) > 0 && !slices.Contains(f.Checks, ev.Check),
		len(f.Records) > 0 && !slices.ContainsFunc(ev.Records, func(r string) bool { return slices.Contains(f.Records, r) }),
		f.To != "" && ev.To != f.To,
		!f.Since.IsZero() && ev.Time.Before(f.Since),
		!f.Until.IsZero() && !ev.Time.Before(f.Until):
		return false
	}
	return true
}

// RecordName is a record name as filters and events hold it: fully
// qualified and lowercase.
func RecordName(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// EventLog is the health-check log: the last transitions, also written to
// the process log as they happen. The zero value is ready; its methods are
// safe for concurrent use.
type EventLog struct {
	mu      sync.Mutex
	events  []Event
	handler atomic.Pointer[func(*Event)]
}

// Handle makes fn see every transition Add takes from now on, before the
// log keeps it: fn completes it (Event.ID, Records, Host, Cell) and passes
// it on. Add runs within the aggregator's push, so fn must not block.
func (l *EventLog) Handle(fn func(*Event)) { l.handler.Store(&fn) }

// Add records a transition this host judged.
func (l *EventLog) Add(ev Event) {
	if fn := l.handler.Load(); fn != nil {
		(*fn)(&ev)
	}
	l.Take(ev)
}

// Take records a transition another host judged, as it came: the handler
// does not see it.
func (l *EventLog) Take(ev Event) {
	l.mu.Lock()
	if len(l.events) == maxEvents {
		l.events = append(l.events[:0], l.events[1:]...)
	}
	l.events = append(l.events, ev)
	l.mu.Unlock()
	subject := []any{"check", ev.Check}
	if ev.Region != "" {
		subject = []any{"region", ev.Region}
	}
	slog.Info("health transition", append(subject, "from", ev.From, "to", ev.To, "reason", ev.Reason, "detail", ev.Detail, "host", ev.Host)...)
}

// Events returns the recent transitions, oldest first.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Select returns the recent transitions f selects, oldest first.
func (l *EventLog) Select(f Filter) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for i := range l.events {
		if f.Match(&l.events[i]) {
			out = append(out, l.events[i])
		}
	}
	return out
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
