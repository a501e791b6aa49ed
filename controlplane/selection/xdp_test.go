package selection_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/selection"
	"github.com/steadydns/steadydns/controlplane/selection/xdprules"
)

// harness loads the XDP program's selection for BPF_PROG_RUN.
func harness(t testing.TB) *xdprules.Harness {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("running the xdp selection under BPF_PROG_RUN needs root (running as uid %d)", os.Geteuid())
	}
	h, err := xdprules.Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// outcome is one selection's answer, as both sides report it.
type outcome struct {
	action   selection.Action
	order    []int
	degraded bool
	ttl      uint32
	open     bool
}

func (o outcome) String() string {
	return fmt.Sprintf("action %d order %v degraded %v ttl %d open %v", o.action, o.order, o.degraded, o.ttl, o.open)
}

func (o outcome) equal(p outcome) bool {
	return o.action == p.action && slices.Equal(o.order, p.order) && o.degraded == p.degraded && o.ttl == p.ttl && o.open == p.open
}

// fields lists the fields in which o and p differ.
func (o outcome) diff(p outcome) string {
	var d []string
	if o.action != p.action {
		d = append(d, fmt.Sprintf("action %d vs %d", o.action, p.action))
	}
	if !slices.Equal(o.order, p.order) {
		d = append(d, fmt.Sprintf("order %v vs %v", o.order, p.order))
	}
	if o.degraded != p.degraded {
		d = append(d, fmt.Sprintf("degraded %v vs %v", o.degraded, p.degraded))
	}
	if o.ttl != p.ttl {
		d = append(d, fmt.Sprintf("ttl %d vs %d", o.ttl, p.ttl))
	}
	if o.open != p.open {
		d = append(d, fmt.Sprintf("open %v vs %v", o.open, p.open))
	}
	return strings.Join(d, ", ")
}

// input is one selection's inputs.
type input xdprules.Input

// goSide is the fallback's answer: the open rule, Select and the TTL.
func (in input) goSide() outcome {
	open := selection.Open(in.Meta, in.Set.Stale, in.Now)
	var ranks selection.Ranks
	if in.Order != nil {
		o := in.Order
		// As geo.Table.Ranks and the program index the ranking.
		ranks = func(region uint8) uint8 { return o.Rank[int(region)%len(o.Rank)] }
	}
	up := func(i uint32) bool { return int(i) < len(in.Up) && in.Up[i] }
	p := selection.Select(in.Set, up, ranks, open, in.Rnd, in.Turn, nil)
	return outcome{action: p.Action, order: p.Order, degraded: p.Degraded, ttl: p.TTL(in.Set), open: open}
}

// xdpSide is the XDP program's answer, from its own code.
func (in input) xdpSide(t testing.TB, h *xdprules.Harness) outcome {
	t.Helper()
	r, err := h.Select(xdprules.Input(in))
	if err != nil {
		t.Fatal(err)
	}
	return outcome{action: r.Action, order: r.Order, degraded: r.Degraded, ttl: r.TTL, open: r.Open}
}

// String prints every input, so a failure can be replayed by hand.
func (in input) String() string {
	var b strings.Builder
	s := in.Set
	fmt.Fprintf(&b, "set: n %d policy %d max_answers %d min_healthy %d when_all_down %d stale %d ttl %d ttl_degraded %d flags %#x\n",
		s.N, s.Policy, s.MaxAnswers, s.MinHealthy, s.WhenAllDown, s.Stale, s.Ttl, s.TtlDegraded, s.Flags)
	for i, c := range s.Candidates() {
		fmt.Fprintf(&b, "  slot %d: check %d weight %d priority %d flags %#x region %d\n", i, c.Check, c.Weight, c.Priority, c.Flags, c.Region)
	}
	var up []int
	for i, u := range in.Up {
		if u {
			up = append(up, i)
		}
	}
	fmt.Fprintf(&b, "table: %d entries, up %v\n", len(in.Up), up)
	if in.Order != nil {
		fmt.Fprintf(&b, "geo ranks: %v\n", in.Order.Rank)
	} else {
		b.WriteString("geo: none\n")
	}
	fmt.Fprintf(&b, "meta %+v now %d rnd %d turn %d", in.Meta, in.Now, in.Rnd, in.Turn)
	return b.String()
}

// same runs in on both sides, fails with the inputs when they differ in
// any field, and returns the common outcome.
func same(t testing.TB, h *xdprules.Harness, in input) outcome {
	t.Helper()
	x, g := in.xdpSide(t, h), in.goSide()
	if !x.equal(g) {
		t.Fatalf("xdp and go differ: %s\nxdp: %s\ngo:  %s\n%s", x.diff(g), x, g, in)
	}
	return x
}

// fresh is the metadata of a table that arrived at boot time 1000s and
// never goes stale.
var fresh = bpf.SteadydnsTableMeta{Version: 1, ArrivedNs: 1000e9}

const now = 1001e9

// randomInput draws one selection's inputs: every policy (and one value no
// policy has, which both sides read as multivalue), max_answers and
// min_healthy from 0 past K, weights with zeros, priorities, backups, geo
// rankings past the last rank, n from 0 to K with junk in unused slots or
// a pool of K+1 to MaxCandidates, checks past the table's end, tables from
// all down to all up, and table metadata around the stale boundary.
func randomInput(rng *rand.Rand) input {
	k := int(selection.K)
	s := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{
		N:           uint8(rng.IntN(k + 1)),
		Policy:      uint8(rng.IntN(5)),
		WhenAllDown: uint8(rng.IntN(3)),
		MaxAnswers:  uint8(rng.IntN(int(selection.MaxAnswers) + 3)),
		MinHealthy:  uint8(rng.IntN(4)),
		Stale:       uint8(rng.IntN(2)),
		Ttl:         uint32(1 + rng.IntN(300)),
	}}
	cs := s.Cand[:]
	checks := 1 + rng.IntN(12)
	if rng.IntN(3) == 0 {
		k = int(selection.MaxCandidates)
		s.N = uint8(int(selection.K) + 1 + rng.IntN(k-int(selection.K)))
		s.Pool = make([]bpf.SteadydnsCandidate, k)
		cs = s.Pool
		checks = 1 + rng.IntN(xdprules.HealthEntries)
	}
	if rng.IntN(3) == 0 {
		s.MinHealthy = uint8(rng.IntN(k + 2))
	}
	if rng.IntN(2) == 0 {
		s.TtlDegraded = uint32(1 + rng.IntN(30))
	}
	if rng.IntN(2) == 0 {
		s.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_GEO)
	}
	junk := rng.IntN(2) == 0
	for i := range cs {
		if i >= int(s.N) && !junk {
			break
		}
		c := &cs[i]
		c.Check = uint32(rng.IntN(checks))
		if rng.IntN(20) == 0 {
			c.Check = uint32(xdprules.HealthEntries + rng.IntN(100)) // no entry: down
		}
		c.Weight = uint8(rng.IntN(256))
		if rng.IntN(4) == 0 {
			c.Weight = 0
		}
		c.Priority = uint8(rng.IntN(3))
		if rng.IntN(10) == 0 {
			c.Priority = uint8(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			c.Flags = uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP)
		}
		c.Region = uint8(rng.IntN(4))
		if rng.IntN(10) == 0 {
			c.Region = uint8(rng.IntN(256))
		}
		c.Addr[0], c.Addr[1], c.Addr[2], c.Addr[3] = 198, 18, 5, byte(i+1)
	}
	// How healthy the table is: all down and all up come often.
	p := []float64{0, 0.25, 0.5, 0.75, 1}[rng.IntN(5)]
	up := make([]bool, checks+rng.IntN(xdprules.HealthEntries-checks+1))
	for i := range up {
		up[i] = rng.Float64() < p
	}
	in := input{Set: s, Up: up, Meta: fresh, Now: now, Rnd: rng.Uint32(), Turn: rng.Uint32()}
	if rng.IntN(4) == 0 {
		in.Rnd, in.Turn = uint32(rng.IntN(16)), uint32(rng.IntN(16))
	}
	if rng.IntN(2) == 0 {
		var o bpf.SteadydnsGeoOrder
		for r := range o.Rank {
			o.Rank[r] = uint8(rng.IntN(selection.GeoRanks + 2))
		}
		in.Order = &o
	}
	switch rng.IntN(6) {
	case 0: // no table yet
		in.Meta = bpf.SteadydnsTableMeta{}
	case 1: // never stale
		in.Meta.StaleAfterNs = 0
		in.Now = rng.Uint64()
	default: // around the stale boundary, and clocks that wrap
		in.Meta.Version = 1 + rng.Uint64N(1000)
		in.Meta.ArrivedNs = rng.Uint64()
		in.Meta.StaleAfterNs = 1 + rng.Uint64N(10e9)
		switch rng.IntN(4) {
		case 0:
			in.Now = in.Meta.ArrivedNs + in.Meta.StaleAfterNs
		case 1:
			in.Now = in.Meta.ArrivedNs + in.Meta.StaleAfterNs + 1
		case 2:
			in.Now = in.Meta.ArrivedNs + rng.Uint64N(in.Meta.StaleAfterNs)
		default:
			in.Now = rng.Uint64()
		}
	}
	return in
}

// TestXDPRandom: on 20,000 random inputs, a third of them pools, the
// fallback's selection gives exactly what the XDP program's own code
// gives: the action, the answers in order, the TTL, the degraded flag and
// the open rule.
func TestXDPRandom(t *testing.T) {
	h := harness(t)
	rng := rand.New(rand.NewPCG(9, 20))
	actions := map[selection.Action]int{}
	var mixed, passed, pooled int
	for range 20_000 {
		in := randomInput(rng)
		o := same(t, h, in)
		actions[o.action]++
		if slices.ContainsFunc(o.order, func(i int) bool { return i >= int(selection.K) }) {
			pooled++
		}
		m, p := in.rules(o)
		mixed += m
		passed += p
	}
	// The draw must reach every action and the rules of backups, or the
	// comparison proves little.
	for _, a := range []selection.Action{selection.Answer, selection.NoData, selection.ServFail} {
		if actions[a] < 100 {
			t.Errorf("action %d drawn %d times in 20,000: the inputs do not cover it", a, actions[a])
		}
	}
	if mixed < 100 || passed < 100 || pooled < 1000 {
		t.Errorf("in 20,000 draws, %d answer backups with primaries (min_healthy), %d pass a nearer healthy backup for a primary (geo), %d answer a pool's candidate past K: want 100, 100 and 1,000",
			mixed, passed, pooled)
	}
}

// rules reports which rules of backups an answer shows: mixed, a backup
// answered with a primary, as min_healthy allows; passed, a primary
// answered in a farther geo rank than a healthy backup.
func (in input) rules(o outcome) (mixed, passed int) {
	if o.action != selection.Answer || len(o.order) == 0 {
		return 0, 0
	}
	cs := in.Set.Candidates()
	isBackup := func(i int) bool { return cs[i].Flags&uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP) != 0 }
	var b, p bool
	for _, i := range o.order {
		b = b || isBackup(i)
		p = p || !isBackup(i)
	}
	if b && p {
		mixed = 1
	}
	if in.Order == nil || isBackup(o.order[0]) || selection.Open(in.Meta, in.Set.Stale, in.Now) {
		return mixed, 0
	}
	rank := func(i int) uint8 {
		return min(in.Order.Rank[int(cs[i].Region)%len(in.Order.Rank)], uint8(selection.GeoRanks-1))
	}
	for i := range cs {
		c := cs[i].Check
		if isBackup(i) && int(c) < len(in.Up) && in.Up[c] && rank(i) < rank(o.order[0]) {
			passed = 1
		}
	}
	return mixed, passed
}

// TestXDPEveryHealthCombination: sets that use every feature at once, one
// check per candidate, under all 2^K tables, every policy and every
// when_all_down, with and without min_healthy and geo.
func TestXDPEveryHealthCombination(t *testing.T) {
	h := harness(t)
	k := int(selection.K)
	var order bpf.SteadydnsGeoOrder
	order.Rank = [64]uint8{0, 1, 2, 3}
	for policy := range uint8(4) {
		for wad := range uint8(3) {
			for _, minHealthy := range []uint8{0, 3} {
				for _, geo := range []*bpf.SteadydnsGeoOrder{nil, &order} {
					s := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{N: uint8(k), Policy: policy, WhenAllDown: wad, MaxAnswers: 3, MinHealthy: minHealthy, Ttl: 60, TtlDegraded: 10}}
					for i := range s.Cand {
						c := &s.Cand[i]
						c.Check = uint32(1 + i)
						c.Weight = uint8(i % 3 * 10) // zeros among them
						c.Priority = uint8((k - i) % 3)
						c.Region = uint8(i % 4)
						if i%4 == 3 {
							c.Flags = uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP)
						}
					}
					for combo := range 1 << k {
						up := make([]bool, k+1)
						up[0] = true
						for i := range k {
							up[1+i] = combo&(1<<i) != 0
						}
						x := uint32(combo) * 2654435761 // a spread of draws and turns
						same(t, h, input{Set: s, Up: up, Order: geo, Meta: fresh, Now: now, Rnd: x, Turn: x >> 7})
					}
				}
			}
		}
	}
}

// TestDrawXDP holds Draw to query_draw, the program's random draw from a
// query's port, ID and name hash, on random inputs and at the edges, and
// checks that the draws spread: a rule that ignored an input would repeat.
func TestDrawXDP(t *testing.T) {
	h := harness(t)
	rng := rand.New(rand.NewPCG(13, 17))
	set := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{N: 1, MaxAnswers: 1}}
	seen := map[uint32]bool{}
	edges := []xdprules.Input{{}, {Port: 0xffff, ID: 0xffff, Hash: ^uint64(0)}, {Port: 1}, {ID: 1}, {Hash: 1}}
	for i := range 500 {
		in := xdprules.Input{Set: set, Meta: fresh, Port: uint16(rng.Uint32()), ID: uint16(rng.Uint32()), Hash: rng.Uint64()}
		if i < len(edges) {
			in.Port, in.ID, in.Hash = edges[i].Port, edges[i].ID, edges[i].Hash
		}
		r, err := h.Select(in)
		if err != nil {
			t.Fatal(err)
		}
		if want := selection.Draw(in.Port, in.ID, in.Hash); r.Draw != want {
			t.Fatalf("port %d id %d hash %#x: xdp draws %d, Go %d", in.Port, in.ID, in.Hash, r.Draw, want)
		}
		seen[r.Draw] = true
	}
	if len(seen) < 495 {
		t.Errorf("500 inputs gave %d distinct draws", len(seen))
	}
}

// TestXDPStatic: a zone file's sets, flagged RR_STATIC, which the program
// answers without the selection's scan, answer as the general rules do at
// every health level, table state and draw: every candidate, in order.
func TestXDPStatic(t *testing.T) {
	h := harness(t)
	rng := rand.New(rand.NewPCG(21, 5))
	for range 2_000 {
		k := 2 + rng.IntN(int(selection.K)-1)
		s := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{N: uint8(k), MaxAnswers: uint8(k), Ttl: uint32(1 + rng.IntN(300)),
			Policy: uint8(bpf.SteadydnsPolicyPOLICY_MULTIVALUE), Flags: uint8(bpf.SteadydnsRrsetFlagsRR_STATIC)}}
		for i := range k {
			s.Cand[i].Addr[0], s.Cand[i].Addr[1], s.Cand[i].Addr[2], s.Cand[i].Addr[3] = 198, 18, 6, byte(i+1)
		}
		// Entry 0 is always up, as the loader keeps it; the rest at random.
		up := make([]bool, 1+rng.IntN(xdprules.HealthEntries))
		up[0] = true
		for i := 1; i < len(up); i++ {
			up[i] = rng.IntN(2) == 0
		}
		in := input{Set: s, Up: up, Meta: fresh, Now: now, Rnd: rng.Uint32(), Turn: rng.Uint32()}
		if rng.IntN(3) == 0 {
			in.Meta = bpf.SteadydnsTableMeta{} // no table yet
		}
		o := same(t, h, in)
		if o.action != selection.Answer || len(o.order) != k || o.degraded || o.ttl != s.Ttl {
			t.Fatalf("static set of %d: %s, want every candidate in order at TTL %d", k, o, s.Ttl)
		}
		for i, j := range o.order {
			if j != i {
				t.Fatalf("static set of %d: order %v, want 0..%d", k, o.order, k-1)
			}
		}
	}
}
