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

// K is the number of candidate slots in a record set.
const K = uint32(len(bpf.SteadydnsRrset{}.Cand))

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
	Order    []int  // candidate slots to answer, in answer order
	Eligible uint32 // the set the policy chose from, for the API
	FailOpen bool   // the set is every primary because too few are healthy
}

// TTL is the TTL of the answers of rr: ttl_degraded, when set, while a
// present candidate is down. It is answer_ttl of bpf/select.h.
func (p Pick) TTL(rr *bpf.SteadydnsRrset) uint32 {
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

// setStats are the statistics of one candidate set, gathered in the scan.
type setStats struct {
	mask, lowMask, lowPrio, wsum uint32
}

func (s *setStats) add(bit, prio, weight uint32) {
	if bit == 0 {
		return
	}
	s.mask |= bit
	s.wsum += weight
	switch {
	case prio < s.lowPrio:
		s.lowPrio, s.lowMask = prio, bit
	case prio == s.lowPrio:
		s.lowMask |= bit
	}
}

// nthMember is the index of the r-th (0-based) member of mask.
func nthMember(mask, r uint32) uint32 {
	var at, seen uint32
	for i := uint32(0); i < K; i++ {
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
func weightedMember(rr *bpf.SteadydnsRrset, mask, r uint32) uint32 {
	var at, acc uint32
	found := false
	for i := uint32(0); i < K; i++ {
		if mask&(1<<i) != 0 {
			acc += uint32(rr.Cand[i].Weight)
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
// room of K the caller lends keeps a query free of allocations.
func Select(rr *bpf.SteadydnsRrset, up func(check uint32) bool, ranks Ranks, open bool, rnd, turn uint32, into []int) Pick {
	var sets [3][GeoRanks]setStats // healthy primaries, healthy backups, every primary
	for i := range sets {
		for r := range sets[i] {
			sets[i][r].lowPrio = ^uint32(0)
		}
	}
	var down uint32
	for i := uint32(0); i < K; i++ {
		c := &rr.Cand[i]
		ok := open || up(c.Check)
		var bit uint32
		if i < uint32(rr.N) {
			bit = 1 << i
		}
		backup := c.Flags&uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP) != 0
		prio, weight := uint32(c.Priority), uint32(c.Weight)
		rank := 0
		if ranks != nil {
			rank = min(int(ranks(c.Region)), GeoRanks-1)
		}
		if !ok {
			down |= bit
		}
		if !backup {
			sets[2][rank].add(bit, prio, weight)
		}
		if !backup && ok {
			sets[0][rank].add(bit, prio, weight)
		}
		if backup && ok {
			sets[1][rank].add(bit, prio, weight)
		}
	}

	// Geo: the nearest rank with a healthy candidate; with none, the
	// nearest with any primary, to fail open there.
	rh, ra := GeoRanks, GeoRanks
	for r := range GeoRanks {
		if rh == GeoRanks && sets[0][r].mask|sets[1][r].mask != 0 {
			rh = r
		}
		if ra == GeoRanks && sets[2][r].mask != 0 {
			ra = r
		}
	}
	r := 0
	switch {
	case rh < GeoRanks:
		r = rh
	case ra < GeoRanks:
		r = ra
	}
	healthy, backups, all := &sets[0][r], &sets[1][r], &sets[2][r]

	// Backups are eligible only while no primary is healthy.
	e := backups
	if healthy.mask != 0 {
		e = healthy
	}
	p := Pick{Action: Answer, Degraded: down != 0, Order: into[:0]}
	if bits.OnesCount32(healthy.mask) < int(rr.MinHealthy) {
		e = all
		p.FailOpen = true
	} else if e.mask == 0 {
		p.FailOpen = true
		switch bpf.SteadydnsWhenAllDown(rr.WhenAllDown) {
		case bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA:
			p.Action = NoData
		case bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL:
			p.Action = ServFail
		}
		e = all
	}

	p.Eligible = e.mask
	pc := uint32(bits.OnesCount32(e.mask))
	mask, start, limit := e.mask, uint32(0), uint32(rr.MaxAnswers)
	switch bpf.SteadydnsPolicy(rr.Policy) {
	case bpf.SteadydnsPolicyPOLICY_FAILOVER:
		mask = e.lowMask
	case bpf.SteadydnsPolicyPOLICY_WEIGHTED:
		limit = 1
		if e.wsum != 0 {
			start = weightedMember(rr, mask, rnd%e.wsum)
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

	for i := uint32(0); i < K; i++ {
		j := (start + i) & (K - 1)
		if mask&(1<<j) != 0 && uint32(len(p.Order)) < limit {
			p.Order = append(p.Order, int(j))
		}
	}
	return p
}
