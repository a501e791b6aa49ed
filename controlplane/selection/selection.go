// Package selection decides which candidates of a record set to answer.
// It mirrors bpf/select.h step for step, so the fallback answers as the XDP
// program does. rules_test.go holds each rule to written-down outcomes
// without root; the other tests run the program's own code through
// xdprules (root) and require the same answers, in the same order, with
// the same TTL.
package selection

import (
	"math/bits"

	"github.com/steadydns/steadydns/bpf"
)

// K is the number of candidates a record set keeps in its slot; a pool
// holds up to MaxCandidates.
const K = uint32(len(bpf.SteadydnsRrset{}.Cand))

// MaxCandidates is the most candidates a set holds, a pool's, and
// MaxAnswers the most a reply answers of them.
const (
	MaxCandidates = uint32(bpf.SteadydnsLimitsPOOL_CANDIDATES)
	MaxAnswers    = uint32(bpf.SteadydnsLimitsMAX_ANSWERS)
)

// Action is what to answer: enum action of the data plane, so both paths
// decide among the same results.
type Action = bpf.SteadydnsAction

// Actions of a Pick.
const (
	Answer   = bpf.SteadydnsActionACT_ANSWER   // the candidates in Pick.Order
	NoData   = bpf.SteadydnsActionACT_NODATA   // when_all_down: nodata
	ServFail = bpf.SteadydnsActionACT_SERVFAIL // when_all_down: servfail
)

// Pick is the outcome of a selection.
type Pick struct {
	Action   Action
	Degraded bool   // a present candidate is down: ttl_degraded applies
	Order    []int  // candidates to answer, by index, in answer order
	Eligible uint64 // the set the policy chose from, for the API
	FailOpen bool   // the set is every primary because too few are healthy
}

// TTL is the TTL of the answers of rr: ttl_degraded, when set, while a
// present candidate is down. It is answer_ttl of bpf/select.h.
func (p Pick) TTL(rr *bpf.Set) uint32 {
	if p.Degraded && rr.TtlDegraded != 0 {
		return rr.TtlDegraded
	}
	return rr.Ttl
}

// Open reports whether a record with stale policy stale answers as if every
// candidate were healthy: no table yet (cold start), or a table older than
// its stale_after under answer_all. now is CLOCK_BOOTTIME, the clock the
// table's arrival is stamped with. It is table_old and table_open of
// bpf/select.h, wrapping subtraction included: the program's stale timer
// applies table_old and marks the table, which table_open reads.
func Open(meta bpf.SteadydnsTableMeta, stale uint8, now uint64) bool {
	if meta.Version == 0 {
		return true
	}
	old := meta.StaleAfterNs != 0 && now-meta.ArrivedNs > meta.StaleAfterNs
	return old && stale == uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL)
}

// Draw is a query's random draw from its source port, ID and name hash
// (loader.NameHash): query_draw of bpf/select.h, which the XDP program
// uses instead of a helper call per query.
func Draw(port, id uint16, hash uint64) uint32 {
	return uint32((hash ^ (uint64(port)<<16 | uint64(id))) * 0x9E3779B97F4A7C15 >> 32)
}

// nthMember is the index of the r-th (0-based) member of mask.
func nthMember(mask uint64, r uint32) uint32 {
	var at, seen uint32
	for i := range uint32(64) {
		if mask&(1<<i) != 0 {
			if seen == r {
				at = i
			}
			seen++
		}
	}
	return at
}

// weightedMember is the member of mask that a draw r < wsum lands on.
func weightedMember(cand []bpf.SteadydnsCandidate, mask uint64, r uint32) uint32 {
	var at, acc uint32
	found := false
	for i := range uint32(len(cand)) {
		if mask&(1<<i) != 0 {
			acc += uint32(cand[i].Weight)
			if !found && r < acc {
				at, found = i, true
			}
		}
	}
	return at
}

// GeoRanks is the number of geo ranks: the client's region, the next two
// it fails over to, and everything else.
const GeoRanks = int(bpf.SteadydnsLimitsGEO_RANKS)

// Ranks gives the rank of each candidate region for one client; nil means
// no geo, every candidate rank 0.
type Ranks func(region uint8) uint8

// Select decides the answers of rr. up reports the health-table state of
// an index; ranks orders regions for the client; open answers as if every
// candidate were healthy. rnd and turn are the random draw and the
// round-robin turn of this query. The pick's order is appended to into[:0]:
// room of MaxAnswers the caller lends keeps a query free of allocations.
func Select(rr *bpf.Set, up func(check uint32) bool, ranks Ranks, open bool, rnd, turn uint32, into []int) Pick {
	cand := rr.Candidates()
	n := uint32(len(cand))
	var healthy, backup uint64
	var rank [GeoRanks]uint64
	for i := range n {
		c := &cand[i]
		if open || up(c.Check) {
			healthy |= 1 << i
		}
		if c.Flags&uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP) != 0 {
			backup |= 1 << i
		}
		r := 0
		if ranks != nil {
			r = min(int(ranks(c.Region)), GeoRanks-1)
		}
		rank[r] |= 1 << i
	}
	present := uint64(1)<<n - 1
	if n == 64 {
		present = ^uint64(0)
	}
	upAll, bupAll, primAll := healthy&^backup, healthy&backup, present&^backup

	// Geo: the nearest rank with a healthy primary; with none in any
	// rank, the nearest with a healthy backup; with neither, the nearest
	// with a primary, to fail open there.
	rm := rank[0]
kinds:
	for _, kind := range [...]uint64{upAll, bupAll, primAll} {
		for _, m := range rank {
			if m&kind != 0 {
				rm = m
				break kinds
			}
		}
	}
	hp, hb, all := upAll&rm, bupAll&rm, primAll&rm

	// The healthy primaries if they reach min_healthy; else with the
	// healthy backups, if together they reach it; else fail open.
	p := Pick{Action: Answer, Degraded: present&^healthy != 0, Order: into[:0]}
	minHealthy := int(rr.MinHealthy)
	var e uint64
	switch both := hp | hb; {
	case hp != 0 && bits.OnesCount64(hp) >= minHealthy:
		e = hp
	case both != 0 && bits.OnesCount64(both) >= minHealthy:
		e = both
	default:
		e = all
		p.FailOpen = true
		if both == 0 && minHealthy == 0 {
			switch bpf.SteadydnsWhenAllDown(rr.WhenAllDown) {
			case bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA:
				p.Action = NoData
			case bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL:
				p.Action = ServFail
			}
		}
	}

	// The chosen set's lowest priority and weight sum.
	lowPrio, lowMask, wsum := ^uint32(0), uint64(0), uint32(0)
	for i := range n {
		if e&(1<<i) == 0 {
			continue
		}
		c := &cand[i]
		wsum += uint32(c.Weight)
		switch prio := uint32(c.Priority); {
		case prio < lowPrio:
			lowPrio, lowMask = prio, 1<<i
		case prio == lowPrio:
			lowMask |= 1 << i
		}
	}

	p.Eligible = e
	pc := uint32(bits.OnesCount64(e))
	mask, start, limit := e, uint32(0), min(uint32(rr.MaxAnswers), MaxAnswers)
	switch bpf.SteadydnsPolicy(rr.Policy) {
	case bpf.SteadydnsPolicyPOLICY_FAILOVER:
		mask = lowMask
	case bpf.SteadydnsPolicyPOLICY_WEIGHTED:
		limit = 1
		if wsum != 0 {
			start = weightedMember(cand, mask, rnd%wsum)
		} else if pc != 0 {
			start = nthMember(mask, rnd%pc)
		}
	case bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN:
		if pc != 0 {
			start = nthMember(mask, turn%pc)
		}
	default: // multivalue
		if pc > limit {
			start = nthMember(mask, rnd%pc)
		}
	}

	for i := range n {
		j := (start + i) % n
		if mask&(1<<j) != 0 && uint32(len(p.Order)) < limit {
			p.Order = append(p.Order, int(j))
		}
	}
	return p
}

// Outcome is an answer set Select can produce: its candidates, a bit
// each, and the TTL they carry.
type Outcome struct {
	Mask uint64
	TTL  uint32
}

// Outcomes calls add with every answer set Select can produce for rr at
// this health, whatever the query's draw, turn or client: for each of
// ranks (nil: no geo), one per start the policy can take (each member
// for multivalue and round robin, each member a weighted draw lands on,
// the lowest priority for failover). A set is added once per start that
// makes it: the caller keeps them apart. NODATA and SERVFAIL add nothing.
func Outcomes(rr *bpf.Set, up func(check uint32) bool, ranks []Ranks, open bool, add func(Outcome)) {
	if len(ranks) == 0 {
		ranks = []Ranks{nil}
	}
	var order [MaxAnswers]int
	emit := func(p Pick) {
		if p.Action != Answer || len(p.Order) == 0 {
			return
		}
		var m uint64
		for _, j := range p.Order {
			m |= 1 << j
		}
		add(Outcome{Mask: m, TTL: p.TTL(rr)})
	}
	cand := rr.Candidates()
	for _, r := range ranks {
		p := Select(rr, up, r, open, 0, 0, order[:0])
		pc := uint32(bits.OnesCount64(p.Eligible))
		switch bpf.SteadydnsPolicy(rr.Policy) {
		case bpf.SteadydnsPolicyPOLICY_FAILOVER:
			emit(p)
		case bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN:
			for turn := range max(pc, 1) {
				emit(Select(rr, up, r, open, 0, turn, order[:0]))
			}
		case bpf.SteadydnsPolicyPOLICY_WEIGHTED:
			// A draw r lands on the member whose weights' running sum
			// first passes r: each member with a weight is hit by the
			// sum before it. With no weight at all, the draw is by count.
			var acc uint32
			for i := range cand {
				if p.Eligible&(1<<i) != 0 && cand[i].Weight != 0 {
					emit(Select(rr, up, r, open, acc, 0, order[:0]))
					acc += uint32(cand[i].Weight)
				}
			}
			if acc == 0 {
				for rnd := range max(pc, 1) {
					emit(Select(rr, up, r, open, rnd, 0, order[:0]))
				}
			}
		default:
			for rnd := range max(pc, 1) {
				emit(Select(rr, up, r, open, rnd, 0, order[:0]))
			}
		}
	}
}
