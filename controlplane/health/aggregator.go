package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/healthtable"
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

// maxResults is how many recent results are kept per check for the API.
const maxResults = 10

// Aggregator turns checkers' result frames into states and pushes the
// fixed-size health table to its sink every period. Its methods are safe
// for concurrent use.
type Aggregator struct {
	out Sink
	log *EventLog

	mu          sync.Mutex
	cfgs        []slotCfg   // one per table entry
	states      []slotState // one per table entry
	tracks      map[string]*track
	trackList   []*track
	index       *Index            // the checks and their slots; nil before the first Reconfigure
	children    []uint32          // every calculated slot's children's slots, one list after the other (slotCfg.children)
	regionBits  map[string]uint64 // each region a check names, to its bit in slotCfg.regions
	calculated  []uint32          // calculated and derived slots, children first
	regions     []string          // server.geo's region names, by id - 1
	shifts      map[string]Shift  // by region
	shifted     []bool            // by server.geo id, at the last push; id 0, no region, never
	recent      map[string][]prober.Result
	known       map[string]Saved // checks not configured now, by id: kept for a reload that adds them back
	changed     chan struct{}
	hash        uint64
	agg         config.Aggregation
	buf         []byte
	frame       prober.Frame // decoding buffer
	lastVersion uint64

	rejected atomic.Uint64
	frames   atomic.Uint64
	future   atomic.Uint64 // results refused for a seq ahead of the clock
	pushCost atomic.Int64  // duration of the last push, ns
	onPush   atomic.Pointer[func(time.Duration)]
}

// New makes an aggregator for cfg, whose table of
// cfg.Aggregation.TableSize entries goes to out every push. index comes
// from Assign. The seed gives the checks their first states; transitions
// go to log.
func New(cfg *config.Config, index *Index, out Sink, seed Seed, log *EventLog) (*Aggregator, error) {
	n := cfg.Aggregation.TableSize
	if err := seed.check(healthtable.Bytes(n)); err != nil {
		return nil, err
	}
	t := &Aggregator{out: out, log: log, buf: make([]byte, healthtable.Bytes(n)), tracks: map[string]*track{},
		states: make([]slotState, n), recent: map[string][]prober.Result{}, known: map[string]Saved{},
		changed: make(chan struct{}, 1), shifts: map[string]Shift{}}
	// A check starts healthy, as Route 53's do, so adding one does not
	// take endpoints out before its first results arrive.
	for i := range t.states {
		t.states[i].state, t.states[i].up = true, true
	}
	t.Reconfigure(cfg, index)
	// Shifts of regions the config still has go on; an expired one ends
	// at the first push, with its event.
	for _, s := range seed.Shifts {
		if slices.Contains(t.regions, s.Region) {
			t.shifts[s.Region] = s
		}
	}
	// A known check starts where it was, whatever entry it has now.
	for id, s := range seed.Saved {
		if i, ok := index.Entry(id); ok {
			t.restore(i, s)
		} else {
			t.known[id] = s
		}
	}
	t.trimKnown()
	// The pinned table is newer than any saved state, when it was
	// computed under this config.
	if seed.Table != nil && seed.ConfigHash == cfg.Hash {
		checks := index.Checks()
		for k := range index.Len() {
			i := index.EntryOf(k)
			st := &t.states[i]
			st.up, st.reason, st.seeded = healthtable.Up(seed.Table, i), healthtable.Reason(seed.Table, i), true
			c := checks.Check(k)
			configured, _ := parseAdmin(c.Admin) // the config allows only the three
			// A forced state says nothing of what the checkers saw.
			if !t.restoreAdmin(i, configured, st.reason) {
				st.state = st.up
			}
		}
	}
	return t, nil
}

// Reconfigure applies a new config. A check that stays keeps its state,
// its checkers' progress through the thresholds and an admin override set
// through the API; a slot that no check owns any more starts over.
func (t *Aggregator) Reconfigure(cfg *config.Config, index *Index) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.states)
	old := t.index
	t.cfgs = make([]slotCfg, n)
	t.children = nil
	for i := range t.cfgs {
		t.cfgs[i] = unusedSlot(cfg.Aggregation.PushInterval)
	}
	checks := index.Checks()
	t.regionBits = regionBits(checks)
	for _, tr := range t.trackList {
		tr.regionBit = t.regionBits[tr.region]
	}
	for k := range checks.Len() {
		c := checks.Check(k)
		i := index.EntryOf(k)
		t.cfgs[i] = newSlotCfg(&c, &cfg.Aggregation, t.regionBits)
		if old != nil && old.OwnerID(i) == c.ID && t.states[i].apiSet {
			t.cfgs[i].admin = t.states[i].apiAdmin
		}
		t.cfgs[i].children = span{uint32(len(t.children)), uint32(len(c.Children))}
		for _, ch := range c.Children {
			e, _ := index.Entry(ch) // the config has every child
			t.children = append(t.children, e)
		}
	}
	for _, dv := range index.Derived() {
		t.cfgs[dv.Entry] = slotCfg{kind: kindDerived, children: span{uint32(len(t.children)), 1}, shift: dv.Region}
		t.children = append(t.children, dv.Base)
	}
	// An alias's target is healthy while an answer of the target is, and
	// an answer with a region reads its derived entry: a shift of the
	// target's regions takes the alias down with them.
	for _, r := range cfg.Records {
		k, ok := checks.Find(config.TargetCheckID(r.Name, r.Type))
		if !ok {
			continue
		}
		i := index.EntryOf(k)
		off := uint32(len(t.children))
		for _, a := range r.Answers {
			if e, ok := index.AnswerEntry(a.Check, a.Region); ok && !slices.Contains(t.children[off:], e) {
				t.children = append(t.children, e)
			}
		}
		t.cfgs[i].children = span{off, uint32(len(t.children)) - off}
	}
	t.regions = index.Regions()
	t.shifted = make([]bool, len(t.regions)+1)
	if old != nil {
		for i := range uint32(n) {
			if id, now := old.OwnerID(i), index.OwnerID(i); id != now {
				if id != "" {
					t.forget(id, i)
				}
				t.states[i] = slotState{state: true, up: true}
				for _, tr := range t.trackList {
					tr.seq[i], tr.okRun[i], tr.failRun[i], tr.reported[i], tr.counted[i] = 0, 0, 0, false, false
					tr.up[i] = true
				}
				if s, ok := t.known[now]; ok {
					t.restore(i, s)
					delete(t.known, now)
				}
			}
		}
	}
	for id := range t.recent {
		if !checks.Has(id) {
			delete(t.recent, id)
		}
	}
	t.trimKnown()
	t.calculated = evalOrder(index, t.cfgs, t.children)
	t.index = index
	t.hash = cfg.Hash
	t.agg = cfg.Aggregation
	t.touch()
}

// regionBits gives each region that a check names a bit of its own, in
// the order they first appear. The config allows at most
// config.MaxCheckerRegions; any beyond 64 would get no bit, and their
// checkers no vote on checks with regions.
func regionBits(checks *config.Checks) map[string]uint64 {
	bits := map[string]uint64{}
	for k := range checks.Len() {
		for _, r := range checks.Regions(k) {
			if _, ok := bits[r]; !ok && len(bits) < 64 {
				bits[strings.Clone(r)] = 1 << len(bits)
			}
		}
	}
	return bits
}

// Index is the current check-to-entry assignment.
func (t *Aggregator) Index() *Index {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.index
}

// SetAdmin sets a check's admin override; the next push applies it.
func (t *Aggregator) SetAdmin(id, override string) error {
	a, ok := parseAdmin(override)
	if !ok {
		return fmt.Errorf("setting admin state of %s: %q is not auto, up or down", id, override)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index.Entry(id)
	if !ok {
		return fmt.Errorf("setting admin state of %s: %w", id, ErrUnknownCheck)
	}
	t.cfgs[i].admin = a
	t.states[i].apiAdmin, t.states[i].apiSet = a, true
	t.touch()
	return nil
}

// SetExternal records the state of an external check, valid for its TTL.
func (t *Aggregator) SetExternal(id string, up bool, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.index.Entry(id)
	if !ok {
		return fmt.Errorf("setting external state of %s: %w", id, ErrUnknownCheck)
	}
	if t.cfgs[i].kind != kindExternal {
		k, _ := t.index.Owner(i)
		return fmt.Errorf("setting external state of %s: it is a %s check", id, t.index.Checks().Type(k))
	}
	st := &t.states[i]
	st.extUp, st.extSet, st.extExpires = up, true, now.Add(t.cfgs[i].ttl).UnixNano()
	t.touch()
	return nil
}

// Observe keeps a result's detail for the API. States come from frames.
func (t *Aggregator) Observe(r prober.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.index.Entry(r.ID); !known {
		return
	}
	rs := t.recent[r.ID]
	// Kept while the check is, across reloads: one copy of the id, not a
	// part of the config each result's id came from.
	if len(rs) > 0 {
		r.ID = rs[0].ID
	} else {
		r.ID = strings.Clone(r.ID)
	}
	if len(rs) == maxResults {
		rs = append(rs[:0], rs[1:]...)
	}
	t.recent[r.ID] = append(rs, r)
}

// IngestFrame applies one encoded result frame from this process's own
// prober, every entry of it, padding included. A frame measured under
// another config is rejected and counted.
func (t *Aggregator) IngestFrame(b []byte, now time.Time) error {
	return t.IngestFrameFrom("", "", b, now)
}

// ErrForged marks a frame whose payload names another prober or region
// than the host that sent it.
var ErrForged = errors.New("the frame speaks for another host")

// IngestFrameFrom is IngestFrame for a frame that host sender published:
// a frame that names another prober, or another region than region when
// region is set, is rejected, so a host's key votes only as that host.
// Results whose seq lies more than a push period ahead of the clock are
// refused: prober seqs count from the prober's start in milliseconds and
// never outrun it, and one far ahead would freeze that checker's vote.
func (t *Aggregator) IngestFrameFrom(sender, region string, b []byte, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := prober.Decode(b, &t.frame); err != nil {
		t.rejected.Add(1)
		return fmt.Errorf("decoding a result frame: %w", err)
	}
	f := &t.frame
	if sender != "" && (f.Prober != sender || region != "" && f.Region != region) {
		t.rejected.Add(1)
		return fmt.Errorf("result frame from %s names prober %q of region %q: %w", sender, f.Prober, f.Region, ErrForged)
	}
	if f.ConfigHash != t.hash {
		t.rejected.Add(1)
		return fmt.Errorf("result frame from %s: config hash %x, want %x", f.Prober, f.ConfigHash, t.hash)
	}
	maxSeq := uint64(now.Add(t.agg.PushInterval).UnixMilli())
	tr := t.tracks[f.Prober]
	if tr == nil {
		tr = newTrack(len(t.states), t.states)
		tr.checker = f.Prober
		t.tracks[f.Prober] = tr
		t.trackList = append(t.trackList, tr)
	}
	if tr.region != f.Region {
		// Kept beyond the frame buffer, which the next frame overwrites.
		tr.region = strings.Clone(f.Region)
		tr.regionBit = t.regionBits[tr.region]
	}
	t.frames.Add(1)
	ns := now.UnixNano()
	n := uint32(len(t.cfgs))
	for k := range f.Entries {
		e := &f.Entries[k]
		if e.Seq == 0 {
			// Padding does a real entry's work, at its own position, on
			// the checker's own track, where a result that does not count
			// changes nothing: a frame costs the same however full it is,
			// and leaves the same memory warm for the push, which reads
			// every track whole.
			if uint32(k) < n {
				tr.apply(uint32(k), &t.cfgs[k], e, false, ns)
			}
			continue
		}
		if e.Seq > maxSeq {
			t.future.Add(1)
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
func (t *Aggregator) Push(now time.Time) error {
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	for i := range t.states {
		if k := t.cfgs[i].kind; k != kindCalculated && k != kindDerived {
			changed = t.settle(i, now) || changed
		}
	}
	// Entry 0 belongs to candidates without a check, and is what the
	// derived entries of such candidates read.
	t.states[0].up, t.states[0].reason = true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC)
	healthtable.Put(t.buf, 0, true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC))
	changed = t.settleShifts(now) || changed
	// Calculated and derived slots in one order, each after what it reads:
	// an alias's target check reads derived entries, and a derived entry
	// may read a calculated check. A derived entry's change is its
	// check's or its region's, which is counted there.
	for _, i := range t.calculated {
		if t.cfgs[i].kind == kindDerived {
			t.settle(int(i), now)
		} else {
			changed = t.settle(int(i), now) || changed
		}
	}
	if changed {
		t.touch()
	}
	version := uint64(now.UnixNano() / int64(t.agg.PushInterval))
	if version <= t.lastVersion {
		version = t.lastVersion + 1
	}
	t.lastVersion = version
	if err := t.out.WriteHealth(t.buf, version, t.hash, uint64(t.agg.StaleAfter)); err != nil {
		return err
	}
	took := time.Since(start)
	t.pushCost.Store(int64(took))
	if f := t.onPush.Load(); f != nil {
		(*f)(took)
	}
	return nil
}

// OnPush makes f see the duration of every push from now on, for a
// histogram: Counters keeps only the last.
func (t *Aggregator) OnPush(f func(time.Duration)) { t.onPush.Store(&f) }

// settle evaluates slot i, logs a transition and writes its entry. It
// reports whether what Saved returns changed: a configured check's
// transition, or its first push, which puts its state in Saved whether or
// not it differs from the healthy start (a check down from its first
// push is not a transition, and without this the state file would keep
// it healthy until something else changed).
func (t *Aggregator) settle(i int, now time.Time) bool {
	st := &t.states[i]
	before := st.up
	c := &t.cfgs[i]
	evaluate(i, c, st, t.states, t.trackList, t.children[c.children.off:c.children.off+c.children.n], t.shifted[c.shift], &t.agg, now)
	changed := false
	if !st.pushed || before != st.up {
		id := t.index.OwnerID(uint32(i))
		if st.pushed && id != "" {
			t.log.Add(Event{Time: now, Check: strings.Clone(id), From: stateName(before), To: stateName(st.up), Reason: ReasonName(st.reason), Detail: t.detail(id)})
		}
		changed = id != ""
		st.since = now.UnixNano()
	}
	st.pushed = true
	healthtable.Put(t.buf, uint32(i), st.up, st.reason)
	return changed
}

func (t *Aggregator) detail(id string) string {
	rs := t.recent[id]
	if len(rs) == 0 {
		return ""
	}
	return rs[len(rs)-1].Detail
}

// Run pushes once every push period, half a period after its start, until
// ctx ends. Probers emit their frames at the start of the period, so the
// push carries the results of the frames just in.
func (t *Aggregator) Run(ctx context.Context) {
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

// Counters are the aggregator's counts since it started.
type Counters struct {
	Frames   uint64        // result frames applied
	Rejected uint64        // frames undecodable, measured under another config, or speaking for another host
	Future   uint64        // results refused for a seq more than a push period ahead of the clock
	LastPush time.Duration // evaluating every slot and writing the table, the last time
}

// Counters reads the counters.
func (t *Aggregator) Counters() Counters {
	return Counters{Frames: t.frames.Load(), Rejected: t.rejected.Load(), Future: t.future.Load(), LastPush: time.Duration(t.pushCost.Load())}
}

// Status is one check's aggregated state.
type Status struct {
	ID       string
	Type     string
	Index    uint32
	Up       bool
	Reason   string // ReasonName of the state's reason
	Admin    string // AdminAuto, AdminUp or AdminDown
	Since    time.Time
	Checkers int             // checkers heard from recently, at the last push
	Healthy  int             // of those, the ones that said healthy
	Results  []prober.Result // the recent results of this host's prober, newest first
	// Counted is the sequence number of the newest result the last push
	// counted: results are kept as they come, states and reasons change
	// at the push, so the newest results may not have been counted yet.
	Counted uint64
	Votes   []Vote // every checker ever heard from, by id
}

// Vote is what one checker says of a check, after its thresholds.
type Vote struct {
	Checker string
	Region  string
	Healthy bool
	Heard   time.Time // the last frame that carried a result for the check; zero if none has
	Counted bool      // heard within aggregation.checker_timeout at the last push: in the quorum's denominator
}

// Statuses lists every check's state, by id.
func (t *Aggregator) Statuses() []Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	checks := t.index.Checks()
	out := make([]Status, 0, checks.Len())
	for _, k := range checks.ByID() {
		id, i := checks.ID(int(k)), t.index.EntryOf(int(k))
		st := &t.states[i]
		s := Status{ID: id, Type: string(checks.Type(int(k))), Index: i, Up: st.up, Reason: ReasonName(st.reason), Admin: t.cfgs[i].admin.String(),
			Checkers: int(st.fresh), Healthy: int(st.healthy), Counted: st.seq}
		if st.pushed {
			s.Since = time.Unix(0, st.since)
		}
		rs := t.recent[id]
		for k := len(rs) - 1; k >= 0; k-- {
			s.Results = append(s.Results, rs[k])
		}
		for _, tr := range t.trackList {
			// A checker outside the check's regions does not run it, so
			// it has no vote to show.
			if r := t.cfgs[i].regions; r != 0 && r&tr.regionBit == 0 {
				continue
			}
			// Counted is what the last push counted, so the votes agree
			// with Checkers and with the state they produced.
			v := Vote{Checker: tr.checker, Region: tr.region, Healthy: tr.up[i], Counted: tr.counted[i]}
			if tr.reported[i] {
				v.Heard = time.Unix(0, tr.seen[i])
			}
			s.Votes = append(s.Votes, v)
		}
		slices.SortFunc(s.Votes, func(a, b Vote) int { return strings.Compare(a.Checker, b.Checker) })
		out = append(out, s)
	}
	return out
}
