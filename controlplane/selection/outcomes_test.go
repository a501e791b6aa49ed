package selection

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

// TestOutcomesCoverSelect: at random health, for random sets of every
// policy, in a slot and pools, with and without geo, every answer set
// Select gives for random draws, turns and client regions is one that
// Outcomes listed, at its TTL; and Outcomes lists nothing more than the
// starts there are.
func TestOutcomesCoverSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 35))
	// Two client regions' rankings of regions 0..4.
	near := func(region uint8) uint8 { return region % 4 }
	far := func(region uint8) uint8 { return (4 - region%5) % 4 }
	for trial := range 3000 {
		k := int(K)
		if trial%3 == 2 {
			k = int(MaxCandidates)
		}
		s := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{
			Ttl: 60, TtlDegraded: uint32(rng.IntN(2) * 30),
			N:           uint8(1 + rng.IntN(k)),
			Policy:      uint8(rng.IntN(4)),
			WhenAllDown: uint8(rng.IntN(3)),
			MaxAnswers:  uint8(1 + rng.IntN(int(MaxAnswers))),
			MinHealthy:  uint8(rng.IntN(3)),
		}}
		randomCandidates(rng, s, k)
		var table [6]bool
		for i := range table {
			table[i] = rng.IntN(2) == 0
		}
		up := func(check uint32) bool { return table[check] }
		var ranks []Ranks
		if rng.IntN(2) == 0 {
			ranks = []Ranks{near, far}
		}
		open := rng.IntN(8) == 0
		listed := map[Outcome]bool{}
		calls := 0
		Outcomes(s, up, ranks, open, func(o Outcome) { listed[o] = true; calls++ })
		if max := max(len(ranks), 1) * int(s.N); calls > max {
			t.Fatalf("trial %d: %d outcomes added, more than %d starts", trial, calls, max)
		}
		for range 200 {
			var r Ranks
			if ranks != nil {
				r = ranks[rng.IntN(len(ranks))]
			}
			p := Select(s, up, r, open, rng.Uint32(), rng.Uint32(), nil)
			if p.Action != Answer || len(p.Order) == 0 {
				continue
			}
			var m uint64
			for _, j := range p.Order {
				m |= 1 << j
			}
			o := Outcome{Mask: m, TTL: p.TTL(s)}
			if !listed[o] {
				t.Fatalf("trial %d: Select answered %s, which Outcomes did not list: %v\nset %+v table %v open %v",
					trial, fmt.Sprint(o), listed, *s, table, open)
			}
		}
	}
}
