package selection_test

import (
	"testing"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/selection"
)

// cand is one candidate of a test set; its check is its slot + 1.
type cand struct {
	weight, prio, region uint8
	backup               bool
}

// set builds a record set of policy with TTL 60 (30 when degraded).
func set(policy bpf.SteadydnsPolicy, maxAnswers uint8, cs ...cand) *bpf.Set {
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

func with(s *bpf.Set, edit func(*bpf.Set)) *bpf.Set {
	edit(s)
	return s
}

// table is a health table in which entry 0 and the checks of every slot
// but the down ones are up.
func table(down ...int) []bool {
	up := make([]bool, 1+selection.MaxCandidates)
	for i := range up {
		up[i] = true
	}
	for _, d := range down {
		up[1+d] = false
	}
	return up
}

var (
	multivalue = bpf.SteadydnsPolicyPOLICY_MULTIVALUE
	failover   = bpf.SteadydnsPolicyPOLICY_FAILOVER
	weighted   = bpf.SteadydnsPolicyPOLICY_WEIGHTED
	roundRobin = bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN

	answer   = selection.Answer
	nodata   = selection.NoData
	servfail = selection.ServFail

	// eu's ranking: region 1 (eu) first, region 2 (us) next, region 5
	// last; region 3 ranks past the last rank.
	euOrder = &bpf.SteadydnsGeoOrder{Rank: [64]uint8{0, 0, 1, 9, 0, 3}}
)

// A hand-picked case: its inputs (table: fresh, draw and turn 0 unless
// set) and the one outcome both sides must give.
type policyCase struct {
	name      string
	set       *bpf.Set
	up        []bool
	order     *bpf.SteadydnsGeoOrder
	meta      *bpf.SteadydnsTableMeta
	now       uint64
	rnd, turn uint32
	want      outcome
}

var policyCases = []policyCase{
	{name: "empty set", set: set(multivalue, 8), up: table(),
		want: outcome{action: answer, ttl: 60}},
	{name: "multivalue as many healthy as max_answers keeps slot order", set: set(multivalue, 3, cand{}, cand{}, cand{}), up: table(), rnd: 1,
		want: outcome{action: answer, order: []int{0, 1, 2}, ttl: 60}},
	{name: "multivalue more healthy than max_answers starts at the draw and wraps", set: set(multivalue, 2, cand{}, cand{}, cand{}, cand{}), up: table(), rnd: 3,
		want: outcome{action: answer, order: []int{3, 0}, ttl: 60}},
	{name: "multivalue draws among the healthy only", set: set(multivalue, 2, cand{}, cand{}, cand{}, cand{}), up: table(1), rnd: 4,
		want: outcome{action: answer, order: []int{2, 3}, degraded: true, ttl: 30}},
	{name: "multivalue max_answers 0 answers nothing", set: set(multivalue, 0, cand{}, cand{}), up: table(),
		want: outcome{action: answer, ttl: 60}},
	{name: "failover lowest priority, ties in slot order", set: set(failover, 8, cand{prio: 1}, cand{prio: 0}, cand{prio: 2}, cand{prio: 0}), up: table(),
		want: outcome{action: answer, order: []int{1, 3}, ttl: 60}},
	{name: "failover to the next priority", set: set(failover, 8, cand{prio: 1}, cand{prio: 0}, cand{prio: 2}, cand{prio: 0}), up: table(1, 3),
		want: outcome{action: answer, order: []int{0}, degraded: true, ttl: 30}},
	{name: "failover all down answers the lowest priority", set: set(failover, 8, cand{prio: 1}, cand{prio: 0}, cand{prio: 0}), up: table(0, 1, 2),
		want: outcome{action: answer, order: []int{1, 2}, degraded: true, ttl: 30}},
	{name: "weighted lands where the draw falls", set: set(weighted, 8, cand{weight: 10}, cand{weight: 0}, cand{weight: 30}), up: table(), rnd: 10,
		want: outcome{action: answer, order: []int{2}, ttl: 60}},
	{name: "weighted first weight", set: set(weighted, 8, cand{weight: 10}, cand{weight: 0}, cand{weight: 30}), up: table(), rnd: 49,
		want: outcome{action: answer, order: []int{0}, ttl: 60}},
	{name: "weighted weight 0 when nothing else is healthy", set: set(weighted, 8, cand{weight: 10}, cand{weight: 0}, cand{weight: 30}), up: table(0, 2), rnd: 7,
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "weighted all weights 0 draws by count", set: set(weighted, 8, cand{}, cand{}, cand{}), up: table(), rnd: 4,
		want: outcome{action: answer, order: []int{1}, ttl: 60}},
	{name: "round robin turn picks the first, then slot order", set: set(roundRobin, 2, cand{}, cand{}, cand{}, cand{}), up: table(2), turn: 5,
		want: outcome{action: answer, order: []int{3, 0}, degraded: true, ttl: 30}},
	{name: "round robin ignores the draw", set: set(roundRobin, 1, cand{}, cand{}, cand{}), up: table(), rnd: 2, turn: 1,
		want: outcome{action: answer, order: []int{1}, ttl: 60}},
	{name: "backup held back", set: set(multivalue, 8, cand{}, cand{backup: true}), up: table(),
		want: outcome{action: answer, order: []int{0}, ttl: 60}},
	{name: "backup takes over", set: set(multivalue, 8, cand{}, cand{backup: true}), up: table(0),
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "backup stays back when all are down", set: set(multivalue, 8, cand{}, cand{backup: true}), up: table(0, 1),
		want: outcome{action: answer, order: []int{0}, degraded: true, ttl: 30}},
	{name: "failover among backups by priority", set: set(failover, 8, cand{}, cand{backup: true, prio: 2}, cand{backup: true, prio: 1}), up: table(0),
		want: outcome{action: answer, order: []int{2}, degraded: true, ttl: 30}},
	{name: "min_healthy keeps failing open whatever when_all_down says", up: table(0, 1),
		set: with(set(multivalue, 8, cand{}, cand{}, cand{}), func(s *bpf.Set) {
			s.MinHealthy, s.WhenAllDown = 2, uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA)
		}),
		want: outcome{action: answer, order: []int{0, 1, 2}, degraded: true, ttl: 30}},
	{name: "min_healthy met", up: table(0),
		set:  with(set(multivalue, 8, cand{}, cand{}, cand{}), func(s *bpf.Set) { s.MinHealthy = 2 }),
		want: outcome{action: answer, order: []int{1, 2}, degraded: true, ttl: 30}},
	{name: "min_healthy short takes the healthy backups before failing open", up: table(0),
		set:  with(set(multivalue, 8, cand{}, cand{}, cand{backup: true}), func(s *bpf.Set) { s.MinHealthy = 2 }),
		want: outcome{action: answer, order: []int{1, 2}, degraded: true, ttl: 30}},
	{name: "min_healthy short even with the backups fails open", up: table(0, 2),
		set:  with(set(multivalue, 8, cand{}, cand{}, cand{backup: true}), func(s *bpf.Set) { s.MinHealthy = 2 }),
		want: outcome{action: answer, order: []int{0, 1}, degraded: true, ttl: 30}},
	{name: "when_all_down nodata", up: table(0, 1),
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.WhenAllDown = uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA) }),
		want: outcome{action: nodata, order: []int{0, 1}, degraded: true, ttl: 30}},
	{name: "when_all_down servfail", up: table(0, 1),
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.WhenAllDown = uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL) }),
		want: outcome{action: servfail, order: []int{0, 1}, degraded: true, ttl: 30}},
	{name: "when_all_down waits for the backups", up: table(0),
		set:  with(set(multivalue, 8, cand{}, cand{backup: true}), func(s *bpf.Set) { s.WhenAllDown = uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA) }),
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "ttl_degraded unset keeps the ttl", up: table(0),
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.TtlDegraded = 0 }),
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 60}},
	{name: "a down check past n does not degrade", up: table(2),
		set:  with(set(multivalue, 8, cand{}, cand{}, cand{}), func(s *bpf.Set) { s.N = 2 }),
		want: outcome{action: answer, order: []int{0, 1}, ttl: 60}},
	{name: "a check past the table is down", up: table(),
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.Cand[1].Check = 1 << 20 }),
		want: outcome{action: answer, order: []int{0}, degraded: true, ttl: 30}},
	{name: "geo own region", set: set(multivalue, 8, cand{region: 2}, cand{region: 1}), up: table(), order: euOrder,
		want: outcome{action: answer, order: []int{1}, ttl: 60}},
	{name: "geo fails over to the next region", set: set(multivalue, 8, cand{region: 2}, cand{region: 1}), up: table(1), order: euOrder,
		want: outcome{action: answer, order: []int{0}, degraded: true, ttl: 30}},
	{name: "geo all down fails open in the nearest region", set: set(multivalue, 8, cand{region: 2}, cand{region: 1}, cand{region: 1}), up: table(0, 1, 2), order: euOrder,
		want: outcome{action: answer, order: []int{1, 2}, degraded: true, ttl: 30}},
	{name: "geo a healthy farther primary beats a healthy backup of the nearest region", set: set(multivalue, 8, cand{region: 1}, cand{region: 1, backup: true}, cand{region: 2}), up: table(0), order: euOrder,
		want: outcome{action: answer, order: []int{2}, degraded: true, ttl: 30}},
	{name: "geo the nearest backup once no primary of any region is healthy", set: set(multivalue, 8, cand{region: 1}, cand{region: 2, backup: true}, cand{region: 2}, cand{region: 3, backup: true}), up: table(0, 2), order: euOrder,
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "geo ranks past the last count as the last", set: set(multivalue, 8, cand{region: 3}, cand{region: 0}, cand{region: 5}), up: table(1), order: euOrder,
		want: outcome{action: answer, order: []int{0, 2}, degraded: true, ttl: 30}},
	{name: "geo no ranking answers every region", set: set(multivalue, 8, cand{region: 2}, cand{region: 1}), up: table(),
		want: outcome{action: answer, order: []int{0, 1}, ttl: 60}},
	{name: "cold start answers all", set: set(multivalue, 8, cand{}, cand{}), up: table(0, 1), meta: &bpf.SteadydnsTableMeta{},
		want: outcome{action: answer, order: []int{0, 1}, ttl: 60, open: true}},
	{name: "fresh table", set: set(multivalue, 8, cand{}, cand{}), up: table(0),
		meta: &bpf.SteadydnsTableMeta{Version: 7, ArrivedNs: 1000e9, StaleAfterNs: 3600e9},
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "stale table under keep keeps the table", set: set(multivalue, 8, cand{}, cand{}), up: table(0),
		meta: &bpf.SteadydnsTableMeta{Version: 8, ArrivedNs: 1000e9, StaleAfterNs: 1},
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "stale table under answer_all answers all", up: table(0),
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.Stale = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL) }),
		meta: &bpf.SteadydnsTableMeta{Version: 8, ArrivedNs: 1000e9, StaleAfterNs: 1},
		want: outcome{action: answer, order: []int{0, 1}, ttl: 60, open: true}},
	{name: "stale_after old exactly is not stale yet", up: table(0),
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.Stale = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL) }),
		meta: &bpf.SteadydnsTableMeta{Version: 8, ArrivedNs: 1000e9, StaleAfterNs: 1e9},
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "stale_after 0 never goes stale", up: table(0), now: 1 << 62,
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.Stale = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL) }),
		want: outcome{action: answer, order: []int{1}, degraded: true, ttl: 30}},
	{name: "a clock before the arrival wraps to stale", up: table(0), now: 999e9,
		set:  with(set(multivalue, 8, cand{}, cand{}), func(s *bpf.Set) { s.Stale = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL) }),
		meta: &bpf.SteadydnsTableMeta{Version: 8, ArrivedNs: 1000e9, StaleAfterNs: 1e9},
		want: outcome{action: answer, order: []int{0, 1}, ttl: 60, open: true}},
}

// TestPolicies: hand-picked cases of every rule, each with its draw and
// turn fixed, give on both sides exactly the outcome written down: the
// action, the answers in order, the TTL and the open rule.
func TestPolicies(t *testing.T) {
	h := harness(t)
	for _, c := range policyCases {
		t.Run(c.name, func(t *testing.T) {
			in := input{Set: c.set, Up: c.up, Order: c.order, Meta: fresh, Now: now, Rnd: c.rnd, Turn: c.turn}
			if c.meta != nil {
				in.Meta = *c.meta
			}
			if c.now != 0 {
				in.Now = c.now
			}
			if got := same(t, h, in); !got.equal(c.want) {
				t.Errorf("got %s, want %s (%s)\n%s", got, c.want, got.diff(c.want), in)
			}
		})
	}
}
