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
	cfgs        []slotCfg   // one per table entry
	states      []slotState // one per table entry
	tracks      map[string]*track
	trackList   []*track
	sink        *track              // takes padding entries' work; never read
	ids         map[uint32]string   // slot → check id, for configured slots
	children    map[uint32][]uint32 // calculated slot → its children's slots
	types       map[string]string
	index       map[string]uint32
	calculated  []uint32 // calculated slots, children first
	recent      map[string][]prober.Result
	hash        uint64
	agg         config.Aggregation
	buf         []byte
	frame       prober.Frame // decoding buffer
	events      []Event
	lastVersion uint64

	rejected atomic.Uint64
	frames   atomic.Uint64
	pushCost atomic.Int64 // duration of the last push, ns
	meta     atomic.Pointer[bpf.SteadydnsTableMeta]
}

// New makes a table for cfg over the data plane's maps. index comes from
// Assign. The pinned table is read: its metadata keeps a restarted server
// from counting as cold while the table it pushed before is fresh, and its
// entries seed the checks' first states, so a restart does not make every
// endpoint flap.
func New(objs *loader.Objects, cfg *config.Config, index map[string]uint32) (*Table, error) {
	n := objs.HealthCapacity()
	t := &Table{objs: objs, buf: make([]byte, loader.HealthTableBytes(n)), tracks: map[string]*track{},
		states: make([]slotState, n), recent: map[string][]prober.Result{}}
	// A check starts healthy, as Route 53's do, so adding one does not
	// take endpoints out before its first results arrive.
	for i := range t.states {
		t.states[i].state, t.states[i].up = true, true
	}
	meta, err := objs.ReadHealth(t.buf)
	if err != nil {
		return nil, err
	}
	t.meta.Store(&meta)
	t.sink = newTrack(n, nil)
	t.Reconfigure(cfg, index)
	if meta.Version != 0 && meta.ConfigHash == cfg.Hash {
		for _, i := range index {
			st := &t.states[i]
			st.up, st.reason, st.seeded = loader.HealthUp(t.buf, i), loader.HealthReason(t.buf, i), true
			// A forced state says nothing of what the checkers saw.
			if r := bpf.SteadydnsHealthReason(st.reason); r != bpf.SteadydnsHealthReasonREASON_ADMIN_UP && r != bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN {
				st.state = st.up
			}
		}
	}
	return t, nil
}

// Reconfigure applies a new config. A check that stays keeps its state,
// its checkers' progress through the thresholds and an admin override set
// through the API; a slot that no check owns any more starts over.
func (t *Table) Reconfigure(cfg *config.Config, index map[string]uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.states)
	old, oldIDs := t.cfgs, t.ids
	t.cfgs = make([]slotCfg, n)
	t.ids = map[uint32]string{}
	t.children = map[uint32][]uint32{}
	t.types = map[string]string{}
	for i := range t.cfgs {
		t.cfgs[i] = unusedSlot(cfg.Aggregation.PushInterval)
	}
	for id, c := range cfg.HealthChecks {
		i := index[id]
		t.cfgs[i] = newSlotCfg(c, cfg.Aggregation.PushInterval)
		t.ids[i] = id
		t.types[id] = c.Type
		if old != nil && oldIDs[i] == id && old[i].admin != t.cfgs[i].admin {
			t.cfgs[i].admin = old[i].admin // set through the API
		}
		for _, ch := range c.Children {
			t.children[i] = append(t.children[i], index[ch])
		}
	}
	if old != nil {
		for i := range uint32(n) {
			if oldIDs[i] != t.ids[i] {
				t.states[i] = slotState{state: true, up: true}
				for _, tr := range t.trackList {
					tr.seq[i], tr.okRun[i], tr.failRun[i], tr.reported[i] = 0, 0, 0, false
					tr.up[i] = true
				}
			}
		}
	}
	for id := range t.recent {
		if _, ok := cfg.HealthChecks[id]; !ok {
			delete(t.recent, id)
		}
	}
	t.calculated = evalOrder(cfg, index)
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
func (t *Table) SetAdmin(id, override string) error {
	a, ok := parseAdmin(override)
	if !ok {
		return fmt.Errorf("setting admin state of %s: %q is not auto, up or down", id, override)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index[id]
	if !ok {
		return fmt.Errorf("setting admin state of %s: %w", id, ErrUnknownCheck)
	}
	t.cfgs[i].admin = a
	return nil
}

// SetExternal records the state of an external check, valid for its TTL.
func (t *Table) SetExternal(id string, up bool, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index[id]
	if !ok {
		return fmt.Errorf("setting external state of %s: %w", id, ErrUnknownCheck)
	}
	if t.cfgs[i].kind != kindExternal {
		return fmt.Errorf("setting external state of %s: it is a %s check", id, t.types[id])
	}
	st := &t.states[i]
	st.extUp, st.extSet, st.extExpires = up, true, now.Add(t.cfgs[i].ttl).UnixNano()
	return nil
}

// Observe keeps a result's detail for the API. States come from frames.
func (t *Table) Observe(r prober.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.index[r.ID]; !known {
		return
	}
	rs := t.recent[r.ID]
	if len(rs) == maxResults {
		rs = append(rs[:0], rs[1:]...)
	}
	t.recent[r.ID] = append(rs, r)
}

// IngestFrame applies one encoded result frame from a checker, every entry
// of it, padding included. A frame measured under another config is
// rejected and counted.
func (t *Table) IngestFrame(b []byte, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := prober.Decode(b, &t.frame); err != nil {
		t.rejected.Add(1)
		return fmt.Errorf("decoding a result frame: %w", err)
	}
	f := &t.frame
	if f.ConfigHash != t.hash {
		t.rejected.Add(1)
		return fmt.Errorf("result frame from %s: config hash %x, want %x", f.Prober, f.ConfigHash, t.hash)
	}
	tr := t.tracks[f.Prober]
	if tr == nil {
		tr = newTrack(len(t.states), t.states)
		t.tracks[f.Prober] = tr
		t.trackList = append(t.trackList, tr)
	}
	t.frames.Add(1)
	ns := now.UnixNano()
	n := uint32(len(t.cfgs))
	for k := range f.Entries {
		e := &f.Entries[k]
		if e.Seq == 0 {
			// Padding does a real entry's work on the sink, at its own
			// position, so a frame costs the same however full it is.
			if uint32(k) < n {
				t.sink.apply(uint32(k), &t.cfgs[k], e, true, ns)
			}
			continue
		}
		if e.Index < n {
			tr.ingest(e.Index, &t.cfgs[e.Index], e, ns)
		}
	}
	return nil
}

// Push evaluates every slot and writes the whole table: every entry,
// every time, so the work does not depend on how many checks there are or
// how many changed. Its version is the push slot.
func (t *Table) Push(now time.Time) error {
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.states {
		if t.cfgs[i].kind != kindCalculated {
			t.settle(i, now)
		}
	}
	for _, i := range t.calculated {
		t.settle(int(i), now)
	}
	// Entry 0 belongs to candidates without a check.
	loader.PutHealthEntry(t.buf, 0, true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC))
	version := uint64(now.UnixNano() / int64(t.agg.PushInterval))
	if version <= t.lastVersion {
		version = t.lastVersion + 1
	}
	t.lastVersion = version
	meta, err := t.objs.PushHealth(t.buf, version, t.hash, uint64(t.agg.StaleAfter))
	if err != nil {
		return err
	}
	t.meta.Store(&meta)
	t.pushCost.Store(int64(time.Since(start)))
	return nil
}

// settle evaluates slot i, logs a transition and writes its entry.
func (t *Table) settle(i int, now time.Time) {
	st := &t.states[i]
	before := st.up
	evaluate(i, &t.cfgs[i], st, t.states, t.trackList, t.children[uint32(i)], &t.agg, now)
	if st.pushed && before != st.up {
		if id, ok := t.ids[uint32(i)]; ok {
			t.logEvent(Event{Time: now, Check: id, From: stateName(before), To: stateName(st.up), Reason: ReasonName(st.reason), Detail: t.detail(id)})
		}
	}
	if !st.pushed || before != st.up {
		st.since = now.UnixNano()
	}
	st.pushed = true
	loader.PutHealthEntry(t.buf, uint32(i), st.up, st.reason)
}

func (t *Table) detail(id string) string {
	rs := t.recent[id]
	if len(rs) == 0 {
		return ""
	}
	return rs[len(rs)-1].Detail
}

func (t *Table) logEvent(ev Event) {
	if len(t.events) == maxEvents {
		t.events = append(t.events[:0], t.events[1:]...)
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

// Status is one check's state for the API.
type Status struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Index    uint32         `json:"index"`
	Up       bool           `json:"healthy"`
	Reason   string         `json:"reason"`
	Admin    string         `json:"admin"`
	Since    time.Time      `json:"since"`
	Checkers int            `json:"checkers_reporting"`
	Healthy  int            `json:"checkers_healthy"`
	Results  []ResultStatus `json:"last_results,omitempty"` // newest first
}

// ResultStatus is one recent probe result.
type ResultStatus struct {
	Time      time.Time `json:"time"`
	Healthy   bool      `json:"healthy"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail,omitempty"`
	LatencyMs float64   `json:"latency_ms"`
}

// Event is a transition of a check's state: the health-check log.
type Event struct {
	Time   time.Time `json:"time"`
	Check  string    `json:"check"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
}

// Statuses lists every check's state, by id.
func (t *Table) Statuses() []Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Status, 0, len(t.index))
	for id, i := range t.index {
		st := &t.states[i]
		s := Status{ID: id, Type: t.types[id], Index: i, Up: st.up, Reason: ReasonName(st.reason), Admin: t.cfgs[i].admin.String(),
			Checkers: int(st.fresh), Healthy: int(st.healthy)}
		if st.pushed {
			s.Since = time.Unix(0, st.since)
		}
		rs := t.recent[id]
		for k := len(rs) - 1; k >= 0; k-- {
			r := rs[k]
			s.Results = append(s.Results, ResultStatus{Time: r.Time, Healthy: r.Healthy, Reason: r.Reason.String(), Detail: r.Detail, LatencyMs: float64(r.Latency.Microseconds()) / 1000})
		}
		out = append(out, s)
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
