package health

import (
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/prober"
)

// The aggregator keeps its state in arrays of one slot per table entry,
// configured or not, and every push walks all of them: the work per push
// depends on the table's capacity, never on how many checks are configured
// or how many fail (docs/design.md, "Constant work"). No slot holds a
// pointer, so the garbage collector need not scan the arrays: a table of
// 65,536 entries would otherwise make every collection walk megabytes, and
// the fallback, which allocates for every query, would wait on it.

// admin is an admin override as a slot keeps it.
type admin uint8

const (
	adminAuto admin = iota
	adminUp
	adminDown
)

var adminNames = [...]string{adminAuto: AdminAuto, adminUp: AdminUp, adminDown: AdminDown}

func (a admin) String() string { return adminNames[a] }

// parseAdmin reads an override; ok is false for anything but auto, up or
// down.
func parseAdmin(s string) (a admin, ok bool) {
	for i, n := range adminNames {
		if n == s {
			return admin(i), true
		}
	}
	return adminAuto, false
}

type kind uint8

const (
	kindProbe kind = iota // judged by checkers' results (also unused slots)
	kindCalculated
	kindExternal
	kindDerived // up while its check is and its region is not shifted (Derived)
)

// slotCfg is a slot's configuration, set on reload.
type slotCfg struct {
	kind       kind
	invert     bool
	okN, failN uint16 // consecutive thresholds
	window     int64  // ns: checkers heard from within it count
	admin      admin
	minHealthy int
	ttl        time.Duration
	initial    bool  // an external slot's state until its first report
	children   span  // a calculated slot's children's slots, or a derived slot's check's, in Aggregator.children
	shift      uint8 // a derived slot's region, by server.geo id
	// regions is the mask of the regions whose checkers vote on the slot,
	// bits given by Aggregator.regionBits; 0 lets every checker vote.
	regions uint64
}

// span is a run of a slice that the slots share.
type span struct{ off, n uint32 }

// slotState is a slot's aggregated state.
type slotState struct {
	state   bool // before the admin override: from checkers, children or the API
	up      bool // after it: what the table says
	reason  uint8
	fresh   uint16 // checkers heard from recently, at the last push
	healthy uint16 // of those, the ones that say healthy
	seq     uint64 // the newest result those checkers reported, at the last push
	pushed  bool
	seeded  bool  // state taken from the pinned table or saved state
	since   int64 // unix ns of the last change of up, or of the first push

	extUp, extSet bool
	extExpires    int64 // unix ns

	apiAdmin admin // the override set through the API, when apiSet
	apiSet   bool
}

// track is what one checker said about every slot, as parallel arrays.
type track struct {
	checker string // the prober's id
	region  string // the prober's region, as its last frame said
	// regionBit is region's bit in Aggregator.regionBits, 0 when no check
	// names it: such a checker votes only on slots open to every region.
	regionBit uint64
	seq       []uint64
	seen      []int64 // unix ns of the last frame that carried the slot
	okRun     []uint16
	failRun   []uint16
	up        []bool // after the consecutive thresholds
	reason    []uint8
	reported  []bool
	counted   []bool // in the slot's quorum denominator at the last push
}

func newTrack(capacity int, initial []slotState) *track {
	t := &track{
		seq: make([]uint64, capacity), seen: make([]int64, capacity),
		okRun: make([]uint16, capacity), failRun: make([]uint16, capacity),
		up: make([]bool, capacity), reason: make([]uint8, capacity), reported: make([]bool, capacity),
		counted: make([]bool, capacity),
	}
	for i := range initial {
		t.up[i] = initial[i].state
	}
	return t
}

// newSlotCfg is c's slot configuration; regionBits gives each of its
// regions a bit.
func newSlotCfg(c *config.Check, agg *config.Aggregation, regionBits map[string]uint64) slotCfg {
	a, _ := parseAdmin(c.Admin) // the config allows only the three
	s := slotCfg{okN: uint16(c.HealthyThreshold), failN: uint16(c.UnhealthyThreshold), invert: c.Invert, admin: a,
		window: int64(agg.CheckerTimeout), minHealthy: c.MinHealthy, ttl: c.TTL, initial: c.Initial != "unhealthy"}
	for _, r := range c.Regions {
		s.regions |= regionBits[r]
	}
	switch c.Type {
	case config.CheckCalculated:
		s.kind = kindCalculated
	case config.CheckExternal:
		s.kind = kindExternal
	}
	return s
}

// unusedSlot is the configuration of a slot no check owns: it is walked
// like any other, and nothing ever reports for it.
func unusedSlot(pushInterval time.Duration) slotCfg {
	return slotCfg{okN: 1, failN: 1, window: int64(pushInterval), admin: adminAuto}
}

// ingest applies one frame entry to slot i: invert, then the consecutive
// thresholds. A result seen before (same or older seq, or padding's seq 0)
// changes nothing but the time the checker was heard, so a frame period
// shorter than the check interval never counts one result twice. Both
// paths do the same work.
func (t *track) ingest(i uint32, cfg *slotCfg, e *prober.Entry, now int64) {
	t.apply(i, cfg, e, e.Seq > t.seq[i], now)
}

// apply does the work of one entry; fresh says whether it counts.
func (t *track) apply(i uint32, cfg *slotCfg, e *prober.Entry, fresh bool, now int64) {
	seq, okRun, failRun, up := t.seq[i], t.okRun[i], t.failRun[i], t.up[i]
	reason, reported, seen := t.reason[i], t.reported[i], t.seen[i]
	// Success or failure is selected without a branch: with checks
	// failing and passing at random entries, a branch on it would be
	// mispredicted for half the entries of a frame, and a half-failing
	// table would cost more than a healthy one.
	ok := b2u(e.Healthy != cfg.invert)
	nOk, nFail := (okRun+1)*ok, (failRun+1)*(1-ok)
	u := b2u(up)
	nUp := ok&(u|b2u(nOk >= cfg.okN))|(1-ok)&u&b2u(nFail < cfg.failN) != 0
	if fresh {
		seq, okRun, failRun, up = e.Seq, nOk, nFail, nUp
		reason, reported = uint8(e.Reason), true
	}
	if e.Seq != 0 {
		seen = now
	}
	// Stored whether changed or not: every entry writes the same memory.
	t.seq[i], t.okRun[i], t.failRun[i], t.up[i] = seq, okRun, failRun, up
	t.reason[i], t.reported[i], t.seen[i] = reason, reported, seen
}

// evaluate decides slot i's state from its checkers (quorum and
// hysteresis), its children (the slots of a calculated check's children),
// its external report or, for a derived slot, its check's slot and
// whether its region is shifted; then the admin override.
func evaluate(i int, cfg *slotCfg, st *slotState, states []slotState, tracks []*track, children []uint32, shifted bool, agg *config.Aggregation, now time.Time) {
	switch cfg.kind {
	case kindDerived:
		base := &states[children[0]]
		st.state, st.reason = base.up, base.reason
		if shifted {
			st.state, st.reason = false, uint8(bpf.SteadydnsHealthReasonREASON_SHIFTED)
		}
	case kindCalculated:
		n := 0
		for _, ch := range children {
			if states[ch].up {
				n++
			}
		}
		st.state, st.reason = n >= cfg.minHealthy, uint8(bpf.SteadydnsHealthReasonREASON_CALCULATED)
	case kindExternal:
		switch {
		case !st.extSet:
			// As a probed check starts healthy, so that adding one to a
			// live record drops nothing; `initial: unhealthy` waits.
			st.state, st.reason = cfg.initial, uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS)
		case now.UnixNano() > st.extExpires:
			st.state, st.reason = false, uint8(bpf.SteadydnsHealthReasonREASON_EXPIRED)
		default:
			st.state, st.reason = st.extUp, uint8(bpf.SteadydnsHealthReasonREASON_EXTERNAL)
		}
	default:
		quorum(i, cfg, st, tracks, agg, now.UnixNano())
	}
	st.up = st.state
	switch cfg.admin {
	case adminUp:
		st.up, st.reason = true, uint8(bpf.SteadydnsHealthReasonREASON_ADMIN_UP)
	case adminDown:
		st.up, st.reason = false, uint8(bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN)
	}
}

// quorum counts the checkers heard from within the slot's window: during a
// partition a location judges by the checkers it can still hear. Healthy
// when more than the quorum share say so (Route 53: 18%), or with
// hysteresis, down below Down and up again at Up. With no checker heard,
// the state stays. A slot with regions counts only the checkers of those
// regions: the test is a mask, made for every track like the rest, so the
// walk costs the same whatever the slot's regions.
func quorum(i int, cfg *slotCfg, st *slotState, tracks []*track, agg *config.Aggregation, now int64) {
	var fresh, healthy uint16
	var reason uint8
	var seq uint64
	for _, t := range tracks {
		// Every array is read for every slot, reported or not: a
		// short-circuit here would skip loads for unused slots and make
		// a sparse table cheaper than a full one.
		recent := b2u(now-t.seen[i] <= cfg.window)
		voter := b2u(cfg.regions == 0) | b2u(cfg.regions&t.regionBit != 0)
		heard := b2u(t.reported[i]) & recent & voter
		up, r := b2u(t.up[i]), t.reason[i]
		t.counted[i] = heard != 0
		fresh += heard
		healthy += heard & up
		seq = max(seq, uint64(heard)*t.seq[i])
		// The reason shown is a failing checker's while any fails.
		take := heard & (b2u(reason == 0) | (1 - up))
		reason = uint8(take)*r | uint8(1-take)*reason
	}
	// Every slot computes a share and writes its state, heard from or
	// not, so the walk costs the same for unused slots.
	share := float64(healthy) / float64(max(fresh, 1))
	var next bool
	switch h := agg.Hysteresis; {
	case h == nil:
		next = share > agg.Quorum
	case st.state:
		next = share >= h.Down
	default:
		next = share >= h.Up
	}
	// Nobody to hear from: the state stays. Selected without a branch,
	// so unused slots run the same instructions as reporting ones.
	kept := uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS)
	if st.seeded {
		kept = st.reason
	}
	quiet := b2u(fresh == 0)
	next = quiet&b2u(st.state)|(1-quiet)&b2u(next) != 0
	reason = uint8(quiet)*kept | uint8(1-quiet)*reason
	st.fresh, st.healthy, st.state, st.reason, st.seq = fresh, healthy, next, reason, seq
}

func b2u(b bool) uint16 {
	if b {
		return 1
	}
	return 0
}

func stateName(up bool) string {
	if up {
		return StateHealthy
	}
	return StateUnhealthy
}

// ReasonName is a reason code's label: the prober's ("timeout",
// "status"…) below 0x80, the aggregator's above.
func ReasonName(r uint8) string {
	switch bpf.SteadydnsHealthReason(r) {
	case bpf.SteadydnsHealthReasonREASON_STATIC:
		return "static"
	case bpf.SteadydnsHealthReasonREASON_ADMIN_UP:
		return "admin_up"
	case bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN:
		return "admin_down"
	case bpf.SteadydnsHealthReasonREASON_CALCULATED:
		return "calculated"
	case bpf.SteadydnsHealthReasonREASON_EXTERNAL:
		return "external"
	case bpf.SteadydnsHealthReasonREASON_EXPIRED:
		return "external_expired"
	case bpf.SteadydnsHealthReasonREASON_NO_RESULTS:
		return "no_results"
	case bpf.SteadydnsHealthReasonREASON_SHIFTED:
		return "shifted"
	}
	return prober.Reason(r).String()
}

// evalOrder lists the slots of calculated checks and derived entries so
// that each comes after its children; the config has no cycles. cfgs and
// children are the slots' configurations and their children's slots.
func evalOrder(index *Index, cfgs []slotCfg, children []uint32) []uint32 {
	var out []uint32
	done := make([]bool, len(cfgs))
	var visit func(i uint32)
	visit = func(i uint32) {
		if done[i] {
			return
		}
		done[i] = true
		c := &cfgs[i]
		for _, ch := range children[c.children.off : c.children.off+c.children.n] {
			visit(ch)
		}
		if c.kind == kindCalculated || c.kind == kindDerived {
			out = append(out, i)
		}
	}
	for k := range index.Len() {
		visit(index.EntryOf(k))
	}
	for _, dv := range index.Derived() {
		visit(dv.Entry)
	}
	return out
}
