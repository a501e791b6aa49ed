package selection

// The rules of Select, Open, Draw and Pick.TTL, each case with the one
// outcome written down, in pure Go: these run without root. xdp_test.go
// holds the same code to the XDP program's through BPF_PROG_RUN.

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

// cand is one candidate of a test set; its check is its slot + 1.
type cand struct {
	weight, prio, region uint8
	backup               bool
}

const (
	multivalue = bpf.SteadydnsPolicyPOLICY_MULTIVALUE
	failover   = bpf.SteadydnsPolicyPOLICY_FAILOVER
	weighted   = bpf.SteadydnsPolicyPOLICY_WEIGHTED
	roundRobin = bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN
)

// rrset builds a record set of policy with TTL 60, 30 when degraded: a
// pool if it has more than K candidates.
func rrset(policy bpf.SteadydnsPolicy, maxAnswers uint8, cs ...cand) *bpf.Set {
	s := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, TtlDegraded: 30, N: uint8(len(cs)), Policy: uint8(policy), MaxAnswers: maxAnswers}}
	cand := s.Cand[:]
	if len(cs) > len(cand) {
		s.Pool = make([]bpf.SteadydnsCandidate, len(cs))
		cand = s.Pool
	}
	for i, c := range cs {
		cand[i] = bpf.SteadydnsCandidate{Check: uint32(1 + i), Weight: c.weight, Priority: c.prio, Region: c.region}
		if c.backup {
			cand[i].Flags = uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP)
		}
	}
	return s
}

// edit applies f to s and returns it, to write a variant inline.
func edit(s *bpf.Set, f func(*bpf.Set)) *bpf.Set {
	f(s)
	return s
}

// mask is the slot set of slots.
func mask(slots ...int) uint64 {
	var m uint64
	for _, s := range slots {
		m |= 1 << s
	}
	return m
}

// euRanks ranks regions for a client in region 1: 1 first, 2 next, 3
// after, 4 past the last rank (counted as the last), any other last.
func euRanks(region uint8) uint8 {
	switch region {
	case 1:
		return 0
	case 2:
		return 1
	case 3:
		return 2
	case 4:
		return 9
	}
	return 3
}

// want is the one outcome of a case.
type want struct {
	action   Action
	order    []int
	degraded bool
	ttl      uint32
	eligible uint64
	failOpen bool
}

func (w want) String() string {
	return fmt.Sprintf("action %d order %v degraded %v ttl %d eligible %08b failOpen %v",
		w.action, w.order, w.degraded, w.ttl, w.eligible, w.failOpen)
}

// selCase is one selection: the set, the slots whose check is down, the
// client's ranking, whether the table is open, the draw and the turn.
type selCase struct {
	name      string
	set       *bpf.Set
	down      []int
	ranks     Ranks
	open      bool
	rnd, turn uint32
	want      want
}

func (c selCase) run(t *testing.T) {
	t.Helper()
	downChecks := map[uint32]bool{}
	for _, d := range c.down {
		downChecks[uint32(1+d)] = true
	}
	up := func(check uint32) bool { return !downChecks[check] }
	p := Select(c.set, up, c.ranks, c.open, c.rnd, c.turn, make([]int, 0, K))
	got := want{action: p.Action, order: p.Order, degraded: p.Degraded, ttl: p.TTL(c.set), eligible: p.Eligible, failOpen: p.FailOpen}
	if len(got.order) == 0 {
		got.order = nil
	}
	if got.action != c.want.action || !slices.Equal(got.order, c.want.order) || got.degraded != c.want.degraded ||
		got.ttl != c.want.ttl || got.eligible != c.want.eligible || got.failOpen != c.want.failOpen {
		t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, c.want)
	}
}

func runCases(t *testing.T, cases []selCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

var (
	answer   = Answer
	nodata   = NoData
	servfail = ServFail
	noData   = uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA)
	servFail = uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL)
)

func TestSelectMultivalue(t *testing.T) {
	three := func() *bpf.Set { return rrset(multivalue, 3, cand{}, cand{}, cand{}) }
	four := func(maxAnswers uint8) *bpf.Set {
		return rrset(multivalue, maxAnswers, cand{}, cand{}, cand{}, cand{})
	}
	runCases(t, []selCase{
		{name: "as many healthy as max_answers, in slot order", set: three(), rnd: 1,
			want: want{action: answer, order: []int{0, 1, 2}, ttl: 60, eligible: mask(0, 1, 2)}},
		{name: "more healthy than max_answers start at the draw and wrap", set: four(2), rnd: 3,
			want: want{action: answer, order: []int{3, 0}, ttl: 60, eligible: mask(0, 1, 2, 3)}},
		{name: "the draw counts healthy candidates only", set: four(2), down: []int{1}, rnd: 4,
			want: want{action: answer, order: []int{2, 3}, degraded: true, ttl: 30, eligible: mask(0, 2, 3)}},
		{name: "a start near the last slot wraps to the first",
			set: rrset(multivalue, 3, cand{}, cand{}, cand{}, cand{}, cand{}, cand{}, cand{}, cand{}), rnd: 6,
			want: want{action: answer, order: []int{6, 7, 0}, ttl: 60, eligible: mask(0, 1, 2, 3, 4, 5, 6, 7)}},
		{name: "max_answers 0 answers nothing", set: rrset(multivalue, 0, cand{}, cand{}),
			want: want{action: answer, ttl: 60, eligible: mask(0, 1)}},
		{name: "an empty set fails open to nothing", set: rrset(multivalue, 8),
			want: want{action: answer, ttl: 60, failOpen: true}},
		{name: "a down check past n neither degrades nor answers", down: []int{2},
			set:  edit(three(), func(s *bpf.Set) { s.N = 2 }),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1)}},
		{name: "candidates sharing a check go down together", down: []int{0},
			set:  edit(three(), func(s *bpf.Set) { s.Cand[2].Check = 1 }),
			want: want{action: answer, order: []int{1}, degraded: true, ttl: 30, eligible: mask(1)}},
		{name: "ttl_degraded 0 keeps the ttl when degraded", down: []int{0},
			set:  edit(three(), func(s *bpf.Set) { s.TtlDegraded = 0 }),
			want: want{action: answer, order: []int{1, 2}, degraded: true, ttl: 60, eligible: mask(1, 2)}},
	})
}

func TestSelectFailover(t *testing.T) {
	prios := func() *bpf.Set {
		return rrset(failover, 8, cand{prio: 1}, cand{prio: 0}, cand{prio: 2}, cand{prio: 0})
	}
	runCases(t, []selCase{
		{name: "the lowest priority, ties in slot order", set: prios(),
			want: want{action: answer, order: []int{1, 3}, ttl: 60, eligible: mask(0, 1, 2, 3)}},
		{name: "the next priority when the lowest are down", set: prios(), down: []int{1, 3},
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0, 2)}},
		{name: "the last priority when the rest are down", set: prios(), down: []int{0, 1, 3},
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(2)}},
		{name: "all down answers the lowest priority of all", set: rrset(failover, 8, cand{prio: 1}, cand{}, cand{}), down: []int{0, 1, 2},
			want: want{action: answer, order: []int{1, 2}, degraded: true, ttl: 30, eligible: mask(0, 1, 2), failOpen: true}},
		{name: "max_answers caps a tie", set: rrset(failover, 2, cand{}, cand{}, cand{}),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1, 2)}},
		{name: "the draw and the turn change nothing", set: rrset(failover, 1, cand{}, cand{}), rnd: 1, turn: 1,
			want: want{action: answer, order: []int{0}, ttl: 60, eligible: mask(0, 1)}},
	})
}

func TestSelectWeighted(t *testing.T) {
	w := func() *bpf.Set {
		return rrset(weighted, 8, cand{weight: 10}, cand{weight: 0}, cand{weight: 30})
	}
	all := mask(0, 1, 2)
	runCases(t, []selCase{
		// The weights sum to 40: draws 0-9 land on slot 0, 10-39 on slot 2.
		{name: "draw 0 lands on the first weight", set: w(), rnd: 0,
			want: want{action: answer, order: []int{0}, ttl: 60, eligible: all}},
		{name: "draw 9 is the first weight's last", set: w(), rnd: 9,
			want: want{action: answer, order: []int{0}, ttl: 60, eligible: all}},
		{name: "draw 10 skips weight 0", set: w(), rnd: 10,
			want: want{action: answer, order: []int{2}, ttl: 60, eligible: all}},
		{name: "draw 39 is the last weight's last", set: w(), rnd: 39,
			want: want{action: answer, order: []int{2}, ttl: 60, eligible: all}},
		{name: "the draw is taken modulo the sum", set: w(), rnd: 49,
			want: want{action: answer, order: []int{0}, ttl: 60, eligible: all}},
		{name: "one answer whatever max_answers", set: w(), rnd: 20,
			want: want{action: answer, order: []int{2}, ttl: 60, eligible: all}},
		{name: "the weights of healthy candidates only",
			set: rrset(weighted, 8, cand{weight: 10}, cand{weight: 20}, cand{weight: 30}), down: []int{0}, rnd: 20,
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
		{name: "weight 0 when nothing else is healthy", set: w(), down: []int{0, 2}, rnd: 7,
			want: want{action: answer, order: []int{1}, degraded: true, ttl: 30, eligible: mask(1)}},
		{name: "all weights 0 draw by count", set: rrset(weighted, 8, cand{}, cand{}, cand{}), rnd: 4,
			want: want{action: answer, order: []int{1}, ttl: 60, eligible: all}},
	})
}

func TestSelectRoundRobin(t *testing.T) {
	three := func(max uint8) *bpf.Set { return rrset(roundRobin, max, cand{}, cand{}, cand{}) }
	runCases(t, []selCase{
		{name: "turn 0 starts at the first", set: three(2), turn: 0,
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1, 2)}},
		{name: "turn 1 starts at the second", set: three(2), turn: 1,
			want: want{action: answer, order: []int{1, 2}, ttl: 60, eligible: mask(0, 1, 2)}},
		{name: "turn 2 wraps", set: three(2), turn: 2,
			want: want{action: answer, order: []int{2, 0}, ttl: 60, eligible: mask(0, 1, 2)}},
		{name: "the turn is taken modulo the healthy count", set: three(8), turn: 4,
			want: want{action: answer, order: []int{1, 2, 0}, ttl: 60, eligible: mask(0, 1, 2)}},
		{name: "turns go round the healthy only",
			set: rrset(roundRobin, 2, cand{}, cand{}, cand{}, cand{}), down: []int{2}, turn: 5,
			want: want{action: answer, order: []int{3, 0}, degraded: true, ttl: 30, eligible: mask(0, 1, 3)}},
		{name: "the draw changes nothing", set: three(1), rnd: 2, turn: 1,
			want: want{action: answer, order: []int{1}, ttl: 60, eligible: mask(0, 1, 2)}},
	})
}

func TestSelectBackup(t *testing.T) {
	pb := func() *bpf.Set { return rrset(multivalue, 8, cand{}, cand{backup: true}) }
	runCases(t, []selCase{
		{name: "held back while a primary is healthy", set: pb(),
			want: want{action: answer, order: []int{0}, ttl: 60, eligible: mask(0)}},
		{name: "takes over when every primary is down", set: pb(), down: []int{0},
			want: want{action: answer, order: []int{1}, degraded: true, ttl: 30, eligible: mask(1)}},
		{name: "backups answer together", set: rrset(multivalue, 8, cand{}, cand{backup: true}, cand{backup: true}), down: []int{0},
			want: want{action: answer, order: []int{1, 2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
		{name: "a down backup degrades the answer", set: pb(), down: []int{1},
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0)}},
		{name: "all down answers the primaries, never a backup", set: pb(), down: []int{0, 1},
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0), failOpen: true}},
		{name: "failover among backups by priority",
			set: rrset(failover, 8, cand{}, cand{backup: true, prio: 2}, cand{backup: true, prio: 1}), down: []int{0},
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
		{name: "weighted among backups by their weights",
			set: rrset(weighted, 8, cand{weight: 10}, cand{backup: true}, cand{backup: true, weight: 5}), down: []int{0}, rnd: 3,
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
	})
}

func TestSelectMinHealthy(t *testing.T) {
	three := func(minHealthy, wad uint8) *bpf.Set {
		return edit(rrset(multivalue, 8, cand{}, cand{}, cand{}), func(s *bpf.Set) { s.MinHealthy, s.WhenAllDown = minHealthy, wad })
	}
	runCases(t, []selCase{
		{name: "met answers the healthy", set: three(2, 0), down: []int{0},
			want: want{action: answer, order: []int{1, 2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
		{name: "short answers every primary", set: three(2, 0), down: []int{0, 1},
			want: want{action: answer, order: []int{0, 1, 2}, degraded: true, ttl: 30, eligible: mask(0, 1, 2), failOpen: true}},
		{name: "short answers whatever when_all_down says", set: three(2, noData), down: []int{0, 1, 2},
			want: want{action: answer, order: []int{0, 1, 2}, degraded: true, ttl: 30, eligible: mask(0, 1, 2), failOpen: true}},
		{name: "enough primaries hold the backups back",
			set:  edit(rrset(multivalue, 8, cand{}, cand{}, cand{backup: true}), func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1)}},
		{name: "short, healthy backups join the primaries before failing open", down: []int{0},
			set:  edit(rrset(multivalue, 8, cand{}, cand{}, cand{backup: true}), func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{1, 2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
		{name: "backups alone reach it when no primary is healthy", down: []int{0, 1},
			set: edit(rrset(multivalue, 8, cand{}, cand{}, cand{backup: true}, cand{backup: true}),
				func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{2, 3}, degraded: true, ttl: 30, eligible: mask(2, 3)}},
		{name: "short even with the backups fails open to every primary", down: []int{0},
			set:  edit(rrset(multivalue, 8, cand{}, cand{}, cand{backup: true}), func(s *bpf.Set) { s.MinHealthy = 3 }),
			want: want{action: answer, order: []int{0, 1}, degraded: true, ttl: 30, eligible: mask(0, 1), failOpen: true}},
		{name: "the policy picks among primaries and backups together", down: []int{0},
			set: edit(rrset(failover, 8, cand{prio: 1}, cand{prio: 1}, cand{backup: true, prio: 0}),
				func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(1, 2)}},
		{name: "more than the set has fails open with all healthy",
			set:  edit(rrset(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.MinHealthy = 5 }),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1), failOpen: true}},
		{name: "short under failover answers the lowest priority of all", down: []int{0, 1},
			set:  edit(rrset(failover, 8, cand{}, cand{prio: 1}, cand{prio: 1}), func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0, 1, 2), failOpen: true}},
	})
}

func TestSelectWhenAllDown(t *testing.T) {
	two := func(wad uint8) *bpf.Set {
		return edit(rrset(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.WhenAllDown = wad })
	}
	withBackup := func(wad uint8) *bpf.Set {
		return edit(rrset(multivalue, 8, cand{}, cand{backup: true}), func(s *bpf.Set) { s.WhenAllDown = wad })
	}
	runCases(t, []selCase{
		{name: "answer_all answers every primary", set: two(0), down: []int{0, 1},
			want: want{action: answer, order: []int{0, 1}, degraded: true, ttl: 30, eligible: mask(0, 1), failOpen: true}},
		{name: "nodata", set: two(noData), down: []int{0, 1},
			want: want{action: nodata, order: []int{0, 1}, degraded: true, ttl: 30, eligible: mask(0, 1), failOpen: true}},
		{name: "servfail", set: two(servFail), down: []int{0, 1},
			want: want{action: servfail, order: []int{0, 1}, degraded: true, ttl: 30, eligible: mask(0, 1), failOpen: true}},
		{name: "one healthy primary is enough", set: two(servFail), down: []int{0},
			want: want{action: answer, order: []int{1}, degraded: true, ttl: 30, eligible: mask(1)}},
		{name: "waits for the backups", set: withBackup(noData), down: []int{0},
			want: want{action: answer, order: []int{1}, degraded: true, ttl: 30, eligible: mask(1)}},
		{name: "applies once the backups are down too", set: withBackup(noData), down: []int{0, 1},
			want: want{action: nodata, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0), failOpen: true}},
	})
}

func TestSelectGeo(t *testing.T) {
	runCases(t, []selCase{
		{name: "the client's own region", set: rrset(multivalue, 8, cand{region: 2}, cand{region: 1}), ranks: euRanks,
			want: want{action: answer, order: []int{1}, ttl: 60, eligible: mask(1)}},
		{name: "the next region when its own is down", set: rrset(multivalue, 8, cand{region: 2}, cand{region: 1}), down: []int{1}, ranks: euRanks,
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0)}},
		{name: "the nearest region with a healthy candidate, skipping an empty rank",
			set: rrset(multivalue, 8, cand{region: 3}, cand{region: 1}, cand{region: 2}), down: []int{1, 2}, ranks: euRanks,
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0)}},
		{name: "all down fails open in the nearest region",
			set: rrset(multivalue, 8, cand{region: 2}, cand{region: 1}, cand{region: 1}), down: []int{0, 1, 2}, ranks: euRanks,
			want: want{action: answer, order: []int{1, 2}, degraded: true, ttl: 30, eligible: mask(1, 2), failOpen: true}},
		{name: "a healthy primary of a farther region beats a healthy backup of the nearest",
			set: rrset(multivalue, 8, cand{region: 1}, cand{region: 1, backup: true}, cand{region: 3}), down: []int{0}, ranks: euRanks,
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(2)}},
		{name: "a backup serves once no primary of any region is healthy",
			set: rrset(multivalue, 8, cand{region: 1}, cand{region: 1, backup: true}, cand{region: 2}), down: []int{0, 2}, ranks: euRanks,
			want: want{action: answer, order: []int{1}, degraded: true, ttl: 30, eligible: mask(1)}},
		{name: "the nearest region with a healthy backup",
			set: rrset(multivalue, 8, cand{region: 3, backup: true}, cand{region: 1}, cand{region: 2, backup: true}), down: []int{1}, ranks: euRanks,
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(2)}},
		{name: "all down fails open in the nearest region with a primary",
			set: rrset(multivalue, 8, cand{region: 1, backup: true}, cand{region: 3}, cand{region: 2}), down: []int{0, 1, 2}, ranks: euRanks,
			want: want{action: answer, order: []int{2}, degraded: true, ttl: 30, eligible: mask(2), failOpen: true}},
		{name: "min_healthy short, the region's backups join before the next region", ranks: euRanks,
			set: edit(rrset(multivalue, 8, cand{region: 1}, cand{region: 1, backup: true}, cand{region: 2}, cand{region: 2}),
				func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1)}},
		{name: "a rank past the last counts as the last",
			set: rrset(multivalue, 8, cand{region: 4}, cand{region: 1}, cand{region: 7}), down: []int{1}, ranks: euRanks,
			want: want{action: answer, order: []int{0, 2}, degraded: true, ttl: 30, eligible: mask(0, 2)}},
		{name: "a down candidate of another region degrades",
			set: rrset(multivalue, 8, cand{region: 1}, cand{region: 2}), down: []int{1}, ranks: euRanks,
			want: want{action: answer, order: []int{0}, degraded: true, ttl: 30, eligible: mask(0)}},
		{name: "min_healthy short fails open in the region, not over to the next", ranks: euRanks, down: []int{0},
			set: edit(rrset(multivalue, 8, cand{region: 1}, cand{region: 1}, cand{region: 2}, cand{region: 2}),
				func(s *bpf.Set) { s.MinHealthy = 2 }),
			want: want{action: answer, order: []int{0, 1}, degraded: true, ttl: 30, eligible: mask(0, 1), failOpen: true}},
		{name: "no ranking answers every region", set: rrset(multivalue, 8, cand{region: 2}, cand{region: 1}),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1)}},
	})
}

// TestSelectOpen: a table that is open (cold or stale under answer_all)
// answers as if every candidate were healthy.
func TestSelectOpen(t *testing.T) {
	runCases(t, []selCase{
		{name: "every candidate, none degraded", set: rrset(multivalue, 8, cand{}, cand{}), down: []int{0, 1}, open: true,
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1)}},
		{name: "backups stay back", set: rrset(multivalue, 8, cand{}, cand{backup: true}), down: []int{0}, open: true,
			want: want{action: answer, order: []int{0}, ttl: 60, eligible: mask(0)}},
		{name: "when_all_down does not apply", down: []int{0, 1}, open: true,
			set:  edit(rrset(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.WhenAllDown = servFail }),
			want: want{action: answer, order: []int{0, 1}, ttl: 60, eligible: mask(0, 1)}},
		{name: "the policy still applies", set: rrset(failover, 8, cand{prio: 1}, cand{prio: 0}), down: []int{0, 1}, open: true,
			want: want{action: answer, order: []int{1}, ttl: 60, eligible: mask(0, 1)}},
	})
}

// TestOpen: cold start and a stale table under answer_all answer as if
// every candidate were healthy; a stale table under keep keeps the table.
func TestOpen(t *testing.T) {
	keep := uint8(bpf.SteadydnsStalePolicySTALE_KEEP)
	all := uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL)
	meta := func(version, arrived, staleAfter uint64) bpf.SteadydnsTableMeta {
		return bpf.SteadydnsTableMeta{Version: version, ArrivedNs: arrived, StaleAfterNs: staleAfter}
	}
	for _, c := range []struct {
		name  string
		meta  bpf.SteadydnsTableMeta
		stale uint8
		now   uint64
		want  bool
	}{
		{"no table yet, keep", meta(0, 0, 0), keep, 5e9, true},
		{"no table yet, answer_all", meta(0, 0, 0), all, 5e9, true},
		{"fresh, keep", meta(7, 1000e9, 3600e9), keep, 1001e9, false},
		{"fresh, answer_all", meta(7, 1000e9, 3600e9), all, 1001e9, false},
		{"stale, keep", meta(8, 1000e9, 1), keep, 1001e9, false},
		{"stale, answer_all", meta(8, 1000e9, 1), all, 1001e9, true},
		{"exactly stale_after old is not stale yet", meta(8, 1000e9, 1e9), all, 1001e9, false},
		{"a nanosecond past stale_after is stale", meta(8, 1000e9, 1e9), all, 1001e9 + 1, true},
		{"stale_after 0 never goes stale", meta(8, 1000e9, 0), all, 1 << 62, false},
		{"a clock before the arrival wraps to stale", meta(8, 1000e9, 1e9), all, 999e9, true},
	} {
		if got := Open(c.meta, c.stale, c.now); got != c.want {
			t.Errorf("%s: Open(%+v, %d, %d) = %v, want %v", c.name, c.meta, c.stale, c.now, got, c.want)
		}
	}
}

// TestDraw pins query_draw's rule to values worked out apart from Go:
// (hash ^ (port<<16 | id)) * 0x9E3779B97F4A7C15 mod 2^64, top 32 bits.
func TestDraw(t *testing.T) {
	for _, c := range []struct {
		port, id uint16
		hash     uint64
		want     uint32
	}{
		{0, 0, 0, 0},
		{0, 1, 0, 2654435769},
		{1, 0, 0, 2042199882},
		{0, 0, 1, 2654435769},
		{53, 0x1234, 0, 1027284748},
		{0xffff, 0xffff, ^uint64(0), 2159379435},
		{40000, 7, 0xdeadbeefcafef00d, 126522662},
	} {
		if got := Draw(c.port, c.id, c.hash); got != c.want {
			t.Errorf("Draw(%d, %#x, %#x) = %d, want %d", c.port, c.id, c.hash, got, c.want)
		}
	}
}

func TestPickTTL(t *testing.T) {
	rr := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 300, TtlDegraded: 20}}
	unset := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 300}}
	for _, c := range []struct {
		rr       *bpf.Set
		degraded bool
		want     uint32
	}{
		{rr, false, 300}, {rr, true, 20}, {unset, false, 300}, {unset, true, 300},
	} {
		if got := (Pick{Degraded: c.degraded}).TTL(c.rr); got != c.want {
			t.Errorf("ttl %d, ttl_degraded %d, degraded %v: TTL %d, want %d", c.rr.Ttl, c.rr.TtlDegraded, c.degraded, got, c.want)
		}
	}
}

func TestNthMember(t *testing.T) {
	for _, c := range []struct {
		mask    uint64
		r, want uint32
	}{
		{0b1011, 0, 0}, {0b1011, 1, 1}, {0b1011, 2, 3},
		{0b1000_0000, 0, 7}, {1 << 63, 0, 63}, {1<<63 | 1<<40, 1, 63},
		{0b1011, 3, 0}, // past the last member: slot 0, as in C
	} {
		if got := nthMember(c.mask, c.r); got != c.want {
			t.Errorf("nthMember(%b, %d) = %d, want %d", c.mask, c.r, got, c.want)
		}
	}
}

// TestSelectIntoAllocatesNothing: with room of MaxAnswers lent, a
// selection allocates nothing and its order is the room lent.
func TestSelectIntoAllocatesNothing(t *testing.T) {
	rr := rrset(multivalue, 8, cand{}, cand{}, cand{backup: true}, cand{region: 2})
	up := func(check uint32) bool { return check != 2 }
	into := make([]int, 0, MaxAnswers)
	var p Pick
	allocs := testing.AllocsPerRun(100, func() {
		p = Select(rr, up, euRanks, false, 7, 3, into)
	})
	if allocs != 0 {
		t.Errorf("Select allocated %v times per call with room lent", allocs)
	}
	if len(p.Order) == 0 || &p.Order[0] != &into[:1][0] {
		t.Errorf("order %v is not in the room lent", p.Order)
	}
}

// TestSelectInvariants: on random sets, tables and draws, every pick
// keeps the rules no single case shows: answers are present, eligible,
// distinct, in slot order from their start, within the limit; the set is
// healthy unless failing open; degraded means a present candidate is down.
func TestSelectInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for trial := range 20_000 {
		k := int(K)
		if trial%2 == 1 {
			k = int(MaxCandidates) // a pool
		}
		s := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{
			Ttl: 60, TtlDegraded: 30,
			N:           uint8(rng.IntN(k + 1)),
			Policy:      uint8(rng.IntN(4)),
			WhenAllDown: uint8(rng.IntN(3)),
			MaxAnswers:  uint8(rng.IntN(int(MaxAnswers) + 1)),
			MinHealthy:  uint8(rng.IntN(4)),
		}}
		randomCandidates(rng, s, k)
		n := int(s.N)
		var table [6]bool
		for i := range table {
			table[i] = rng.IntN(2) == 0
		}
		up := func(check uint32) bool { return table[check] }
		var ranks Ranks
		if rng.IntN(2) == 0 {
			ranks = euRanks
		}
		open := rng.IntN(8) == 0
		p := Select(s, up, ranks, open, rng.Uint32(), rng.Uint32(), nil)
		fail := func(format string, args ...any) {
			t.Fatalf("trial %d: %s\nset %+v\ntable %v open %v geo %v\npick %+v", trial, fmt.Sprintf(format, args...), *s, table, open, ranks != nil, p)
		}

		present := uint64(1)<<n - 1
		if n == 64 {
			present = ^uint64(0)
		}
		var down uint64
		for i := range n {
			if !open && !up(s.Candidates()[i].Check) {
				down |= 1 << i
			}
		}
		if p.Degraded != (down != 0) {
			fail("degraded %v with down slots %08b", p.Degraded, down)
		}
		if p.Eligible&^present != 0 {
			fail("eligible %08b beyond the %d present", p.Eligible, s.N)
		}
		if !p.FailOpen && p.Eligible&down != 0 {
			fail("eligible %08b includes down %08b without failing open", p.Eligible, down)
		}
		if p.Action != Answer && !p.FailOpen {
			fail("action %d without failing open", p.Action)
		}
		limit := int(s.MaxAnswers)
		if bpf.SteadydnsPolicy(s.Policy) == weighted {
			limit = 1
		}
		if len(p.Order) > limit {
			fail("%d answers, limit %d", len(p.Order), limit)
		}
		if len(p.Order) == 0 && p.Eligible != 0 && limit > 0 {
			fail("no answer from eligible %08b", p.Eligible)
		}
		if want := min(limit, bits.OnesCount64(p.Eligible)); bpf.SteadydnsPolicy(s.Policy) != failover && len(p.Order) != want {
			fail("%d answers, want %d", len(p.Order), want)
		}
		for i, slot := range p.Order {
			if p.Eligible&(1<<slot) == 0 {
				fail("slot %d answered, not eligible", slot)
			}
			if i > 0 {
				// Slot order from the first answer, wrapping once.
				prev := (p.Order[i-1] - p.Order[0] + n) % n
				if cur := (slot - p.Order[0] + n) % n; cur <= prev {
					fail("slot %d after %d: not in slot order from %d", slot, p.Order[i-1], p.Order[0])
				}
			}
		}
	}
}

// randomCandidates fills s with k random candidates, a pool past K: checks
// 0..5 of a random table, weights, priorities, regions 0..4 and a quarter
// backups.
func randomCandidates(rng *rand.Rand, s *bpf.Set, k int) {
	cs := s.Cand[:]
	if k > int(K) {
		s.Pool = make([]bpf.SteadydnsCandidate, k)
		cs = s.Pool
	}
	for i := range cs {
		cs[i] = bpf.SteadydnsCandidate{Check: uint32(rng.IntN(6)), Weight: uint8(rng.IntN(4) * 10),
			Priority: uint8(rng.IntN(3)), Region: uint8(rng.IntN(5))}
		if rng.IntN(4) == 0 {
			cs[i].Flags = uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP)
		}
	}
}
