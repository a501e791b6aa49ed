package health

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/loader"
)

// Admin override values.
const (
	AdminAuto = "auto"
	AdminUp   = "up"
	AdminDown = "down"
)

// Status is one check's entry as last pushed.
type Status struct {
	ID     string    `json:"id"`
	Type   string    `json:"type"`
	Index  uint32    `json:"index"`
	Up     bool      `json:"healthy"`
	Reason string    `json:"reason"`
	Admin  string    `json:"admin"`
	Since  time.Time `json:"since"`
}

// Event is a transition of a check's state: the health-check log.
type Event struct {
	Time   time.Time `json:"time"`
	Check  string    `json:"check"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
}

const maxEvents = 1000

type entry struct {
	check  *config.Check
	index  uint32
	admin  string
	up     bool
	reason bpf.SteadydnsHealthReason
	since  time.Time
	pushed bool
}

// Table builds and pushes the health table. Its methods are safe for
// concurrent use.
type Table struct {
	objs *loader.Objects

	mu         sync.Mutex
	entries    map[string]*entry
	index      map[string]uint32
	hash       uint64
	push       time.Duration
	staleAfter time.Duration
	buf        []byte
	events     []Event

	meta atomic.Pointer[bpf.SteadydnsTableMeta]
}

// New makes a table for cfg over the data plane's maps. index comes from
// Assign. The metadata already pinned is read, so a restarted server is
// not cold while the table it pushed before is fresh.
func New(objs *loader.Objects, cfg *config.Config, index map[string]uint32) (*Table, error) {
	t := &Table{objs: objs, entries: map[string]*entry{}, buf: make([]byte, loader.HealthTableBytes(objs.HealthCapacity()))}
	meta, err := objs.ReadHealth(t.buf)
	if err != nil {
		return nil, err
	}
	t.meta.Store(&meta)
	t.Reconfigure(cfg, index)
	return t, nil
}

// Reconfigure applies a new config. Admin overrides set through the API
// survive for checks that remain.
func (t *Table) Reconfigure(cfg *config.Config, index map[string]uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.entries
	t.entries = make(map[string]*entry, len(cfg.HealthChecks))
	for id, c := range cfg.HealthChecks {
		e := &entry{check: c, index: index[id], admin: c.Admin}
		if o, ok := old[id]; ok {
			e.up, e.reason, e.since, e.pushed = o.up, o.reason, o.since, o.pushed
			if o.admin != o.check.Admin {
				e.admin = o.admin // set through the API
			}
		}
		t.entries[id] = e
	}
	t.index = index
	t.hash = cfg.Hash
	t.push = cfg.Aggregation.PushInterval
	t.staleAfter = cfg.Aggregation.StaleAfter
}

// Index is the current check-to-entry assignment.
func (t *Table) Index() map[string]uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.index
}

// SetAdmin sets a check's admin override; the next push applies it.
func (t *Table) SetAdmin(id, admin string) error {
	switch admin {
	case AdminAuto, AdminUp, AdminDown:
	default:
		return fmt.Errorf("setting admin state of %s: %q is not auto, up or down", id, admin)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[id]
	if !ok {
		return fmt.Errorf("setting admin state of %s: %w", id, ErrUnknownCheck)
	}
	e.admin = admin
	return nil
}

// ErrUnknownCheck is returned for a check id not in the config.
var ErrUnknownCheck = fmt.Errorf("no such check")

// state decides an entry's state. Until probers report, a check in auto
// is assumed up.
func (e *entry) state() (bool, bpf.SteadydnsHealthReason) {
	switch e.admin {
	case AdminUp:
		return true, bpf.SteadydnsHealthReasonREASON_ADMIN_UP
	case AdminDown:
		return false, bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN
	}
	return true, bpf.SteadydnsHealthReasonREASON_UNPROBED
}

// Push writes the whole table: every entry, every time, so the work does
// not depend on how many states changed. Its version is the push slot.
func (t *Table) Push(now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.buf)
	loader.PutHealthEntry(t.buf, 0, true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC))
	for id, e := range t.entries {
		up, reason := e.state()
		if e.pushed && (up != e.up || reason != e.reason) {
			t.logEvent(Event{Time: now, Check: id, From: stateName(e.up), To: stateName(up), Reason: ReasonName(reason)})
		}
		if !e.pushed || up != e.up {
			e.since = now
		}
		e.up, e.reason, e.pushed = up, reason, true
		loader.PutHealthEntry(t.buf, e.index, up, uint8(reason))
	}
	version := uint64(now.UnixNano() / int64(t.push))
	if err := t.objs.WriteHealth(t.buf, version, t.hash, uint64(t.staleAfter)); err != nil {
		return err
	}
	meta := bpf.SteadydnsTableMeta{Version: version, ConfigHash: t.hash, ArrivedNs: loader.BootNs(), StaleAfterNs: uint64(t.staleAfter)}
	t.meta.Store(&meta)
	return nil
}

func (t *Table) logEvent(ev Event) {
	if len(t.events) == maxEvents {
		copy(t.events, t.events[1:])
		t.events = t.events[:maxEvents-1]
	}
	t.events = append(t.events, ev)
	slog.Info("health transition", "check", ev.Check, "from", ev.From, "to", ev.To, "reason", ev.Reason)
}

// Run pushes every push period until ctx ends.
func (t *Table) Run(ctx context.Context) {
	for {
		if err := t.Push(time.Now()); err != nil {
			slog.Error("pushing the health table", "error", err)
		}
		t.mu.Lock()
		d := t.push
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(d - time.Duration(time.Now().UnixNano())%d):
		}
	}
}

// Up reports an entry's state as the data plane reads it.
func (t *Table) Up(index uint32) bool { return t.objs.HealthUpAt(index) }

// Open reports whether a record with the given stale policy answers every
// candidate: no table yet (cold start), or a stale table under answer_all.
func (t *Table) Open(stale uint8) bool {
	m := t.meta.Load()
	if m.Version == 0 {
		return true
	}
	return stale == uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL) && m.StaleAfterNs != 0 && loader.BootNs()-m.ArrivedNs > m.StaleAfterNs
}

// Meta describes the table now in the data plane.
type Meta struct {
	Version  uint64  `json:"version"`
	AgeSec   float64 `json:"age_seconds"`
	ColdOpen bool    `json:"fail_open_cold_start"` // no table yet: every record answers all candidates
	Stale    bool    `json:"stale"`
}

// Meta reports the table's version and age.
func (t *Table) Meta() Meta {
	m := t.meta.Load()
	if m.Version == 0 {
		return Meta{ColdOpen: true}
	}
	age := time.Duration(loader.BootNs() - m.ArrivedNs)
	return Meta{Version: m.Version, AgeSec: age.Seconds(), Stale: m.StaleAfterNs != 0 && uint64(age) > m.StaleAfterNs}
}

// Statuses lists every check's entry, by id.
func (t *Table) Statuses() []Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Status, 0, len(t.entries))
	for id, e := range t.entries {
		out = append(out, Status{ID: id, Type: e.check.Type, Index: e.index, Up: e.up, Reason: ReasonName(e.reason), Admin: e.admin, Since: e.since})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Events returns the recent transitions, oldest first.
func (t *Table) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}

func stateName(up bool) string {
	if up {
		return "healthy"
	}
	return "unhealthy"
}

// ReasonName is a reason code's label: "admin_down", "unprobed"…
func ReasonName(r bpf.SteadydnsHealthReason) string {
	switch r {
	case bpf.SteadydnsHealthReasonREASON_STATIC:
		return "static"
	case bpf.SteadydnsHealthReasonREASON_ADMIN_UP:
		return "admin_up"
	case bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN:
		return "admin_down"
	case bpf.SteadydnsHealthReasonREASON_UNPROBED:
		return "unprobed"
	}
	return "none"
}
