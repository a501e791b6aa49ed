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
	"github.com/steadydns/steadydns/prober"
)

// Admin override values.
const (
	AdminAuto = "auto"
	AdminUp   = "up"
	AdminDown = "down"
)

// ErrUnknownCheck is returned for a check id not in the config.
var ErrUnknownCheck = fmt.Errorf("no such check")

const (
	maxEvents  = 1000
	maxResults = 10 // recent results kept per check for the API
)

// Table aggregates results into states and pushes the fixed-size health
// table. Its methods are safe for concurrent use.
type Table struct {
	objs *loader.Objects

	mu          sync.Mutex
	checks      map[string]*check
	order       []string          // evaluation order: children before calculated parents
	byIndex     map[uint32]*check // table index → check, for frame entries
	index       map[string]uint32
	hash        uint64
	agg         config.Aggregation
	buf         []byte
	events      []Event
	rejected    atomic.Uint64
	frames      atomic.Uint64
	pushCost    atomic.Int64 // duration of the last push, ns
	lastVersion uint64

	meta atomic.Pointer[bpf.SteadydnsTableMeta]
}

// New makes a table for cfg over the data plane's maps. index comes from
// Assign. The pinned table is read: its metadata keeps a restarted server
// from counting as cold while the table it pushed before is fresh, and its
// entries seed the checks' first states, so a restart does not make every
// endpoint flap.
func New(objs *loader.Objects, cfg *config.Config, index map[string]uint32) (*Table, error) {
	t := &Table{objs: objs, checks: map[string]*check{}, buf: make([]byte, loader.HealthTableBytes(objs.HealthCapacity()))}
	meta, err := objs.ReadHealth(t.buf)
	if err != nil {
		return nil, err
	}
	t.meta.Store(&meta)
	t.Reconfigure(cfg, index)
	if meta.Version != 0 && meta.ConfigHash == cfg.Hash {
		for _, c := range t.checks {
			c.up = loader.HealthUp(t.buf, c.index)
			c.reason = loader.HealthReason(t.buf, c.index)
			// A forced state says nothing of what the checkers saw.
			if r := bpf.SteadydnsHealthReason(c.reason); r != bpf.SteadydnsHealthReasonREASON_ADMIN_UP && r != bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN {
				c.state = c.up
			}
			c.seeded = true
		}
	}
	return t, nil
}

// Reconfigure applies a new config. The state, history and admin override
// of a check that stays are kept; set through the API, an override
// survives a reload.
func (t *Table) Reconfigure(cfg *config.Config, index map[string]uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.checks
	t.checks = make(map[string]*check, len(cfg.HealthChecks))
	t.byIndex = make(map[uint32]*check, len(cfg.HealthChecks))
	for id, cc := range cfg.HealthChecks {
		c := newCheck(cc, index[id])
		if o, ok := old[id]; ok {
			c.inherit(o)
		}
		t.checks[id] = c
		t.byIndex[c.index] = c
	}
	t.order = evalOrder(cfg)
	t.index = index
	t.hash = cfg.Hash
	t.agg = cfg.Aggregation
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
	c, ok := t.checks[id]
	if !ok {
		return fmt.Errorf("setting admin state of %s: %w", id, ErrUnknownCheck)
	}
	c.admin = admin
	return nil
}

// SetExternal records the state of an external check, valid for its TTL.
func (t *Table) SetExternal(id string, up bool, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.checks[id]
	if !ok {
		return fmt.Errorf("setting external state of %s: %w", id, ErrUnknownCheck)
	}
	if c.cfg.Type != "external" {
		return fmt.Errorf("setting external state of %s: it is a %s check", id, c.cfg.Type)
	}
	c.external, c.externalSet, c.expires = up, true, now.Add(c.cfg.TTL)
	return nil
}

// Observe keeps a result's detail for the API. States come from frames.
func (t *Table) Observe(r prober.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.checks[r.ID]; ok {
		c.remember(r)
	}
}

// IngestFrame applies one encoded result frame from a checker. A frame
// measured under another config is rejected and counted.
func (t *Table) IngestFrame(b []byte, now time.Time) error {
	var f prober.Frame
	if err := prober.Decode(b, &f); err != nil {
		t.rejected.Add(1)
		return fmt.Errorf("decoding a result frame: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.ConfigHash != t.hash {
		t.rejected.Add(1)
		return fmt.Errorf("result frame from %s: config hash %x, want %x", f.Prober, f.ConfigHash, t.hash)
	}
	t.frames.Add(1)
	for i := range f.Entries {
		e := &f.Entries[i]
		if e.Seq == 0 {
			continue // padding
		}
		if c, ok := t.byIndex[e.Index]; ok {
			c.ingest(f.Prober, e, now)
		}
	}
	return nil
}

// Push evaluates every check and writes the whole table: every entry,
// every time, so the work does not depend on how many states changed. Its
// version is the push slot.
func (t *Table) Push(now time.Time) error {
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.buf)
	loader.PutHealthEntry(t.buf, 0, true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC))
	states := make(map[string]bool, len(t.checks)) // final states, for calculated checks
	for _, id := range t.order {
		c := t.checks[id]
		before := c.up
		c.evaluate(now, t.agg, t.checks, states)
		states[id] = c.up
		if c.pushed && before != c.up {
			t.logEvent(Event{Time: now, Check: id, From: stateName(before), To: stateName(c.up), Reason: ReasonName(c.reason), Detail: c.detail()})
		}
		if !c.pushed || before != c.up {
			c.since = now
		}
		c.pushed = true
		loader.PutHealthEntry(t.buf, c.index, c.up, c.reason)
	}
	version := uint64(now.UnixNano() / int64(t.agg.PushInterval))
	if version <= t.lastVersion {
		version = t.lastVersion + 1
	}
	t.lastVersion = version
	if err := t.objs.WriteHealth(t.buf, version, t.hash, uint64(t.agg.StaleAfter)); err != nil {
		return err
	}
	meta := bpf.SteadydnsTableMeta{Version: version, ConfigHash: t.hash, ArrivedNs: loader.BootNs(), StaleAfterNs: uint64(t.agg.StaleAfter)}
	t.meta.Store(&meta)
	t.pushCost.Store(int64(time.Since(start)))
	return nil
}

func (t *Table) logEvent(ev Event) {
	if len(t.events) == maxEvents {
		copy(t.events, t.events[1:])
		t.events = t.events[:maxEvents-1]
	}
	t.events = append(t.events, ev)
	slog.Info("health transition", "check", ev.Check, "from", ev.From, "to", ev.To, "reason", ev.Reason, "detail", ev.Detail)
}

// Run pushes once every push period, half a period after its start, until
// ctx ends. Probers emit their frames at the start of the period, so the
// push carries the results of the frames just in.
func (t *Table) Run(ctx context.Context) {
	for {
		t.mu.Lock()
		d := t.agg.PushInterval
		t.mu.Unlock()
		wait := (d + d/2 - time.Duration(time.Now().UnixNano())%d) % d
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := t.Push(time.Now()); err != nil {
			slog.Error("pushing the health table", "error", err)
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
	Version        uint64  `json:"version"`
	AgeSec         float64 `json:"age_seconds"`
	ColdOpen       bool    `json:"fail_open_cold_start"` // no table yet: every record answers all candidates
	Stale          bool    `json:"stale"`
	PushSeconds    float64 `json:"last_push_seconds"`
	Frames         uint64  `json:"frames_ingested"`
	FramesRejected uint64  `json:"frames_rejected"`
}

// Meta reports the table's version, age and the aggregator's counters.
func (t *Table) Meta() Meta {
	m := t.meta.Load()
	out := Meta{PushSeconds: time.Duration(t.pushCost.Load()).Seconds(), Frames: t.frames.Load(), FramesRejected: t.rejected.Load()}
	if m.Version == 0 {
		out.ColdOpen = true
		return out
	}
	age := time.Duration(loader.BootNs() - m.ArrivedNs)
	out.Version, out.AgeSec = m.Version, age.Seconds()
	out.Stale = m.StaleAfterNs != 0 && uint64(age) > m.StaleAfterNs
	return out
}

// Statuses lists every check's state, by id.
func (t *Table) Statuses() []Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Status, 0, len(t.checks))
	for id, c := range t.checks {
		out = append(out, c.status(id))
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
