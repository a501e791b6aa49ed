package selection_test

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/geo"
	"github.com/steadydns/steadydns/controlplane/selection"
)

// fullSet is a multivalue set of K candidates, all answered at once.
func fullSet() *bpf.Set {
	cs := make([]cand, selection.K)
	return set(multivalue, uint8(selection.K), cs...)
}

// TestSelectionByHealth: a set of K candidates with 0, 1, K-1 and K healthy.
func TestSelectionByHealth(t *testing.T) {
	h := harness(t)
	k := int(selection.K)
	all := make([]int, k)
	for i := range all {
		all[i] = i
	}
	downExcept := func(up ...int) []int {
		var down []int
		for i := range k {
			if !slices.Contains(up, i) {
				down = append(down, i)
			}
		}
		return down
	}
	cases := []struct {
		name string
		up   []int
		want []int
	}{
		{"none healthy fails open", nil, all},
		{"one healthy", []int{5}, []int{5}},
		{"K-1 healthy", all[1:], all[1:]},
		{"K healthy", all, all},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input{Set: fullSet(), Up: table(downExcept(c.up...)...), Meta: fresh, Now: now}
			for range 20 {
				in.Rnd, in.Turn = rng.Uint32(), rng.Uint32()
				if got := same(t, h, in); !slices.Equal(got.order, c.want) {
					t.Fatalf("answers %v, want %v", got.order, c.want)
				}
			}
		})
	}
}

// TestMaxAnswers: more healthy candidates than max_answers gives exactly
// max_answers of them, consecutive in slot order from a random start, and
// over many queries every healthy candidate is answered.
func TestMaxAnswers(t *testing.T) {
	h := harness(t)
	k := int(selection.K)
	s := fullSet()
	s.MaxAnswers = 3
	in := input{Set: s, Up: table(k - 1), Meta: fresh, Now: now} // all but the last
	healthy := make([]int, k-1)
	for i := range healthy {
		healthy[i] = i
	}
	seen := map[int]int{}
	for range 2000 {
		in.Rnd, in.Turn = rand.Uint32(), rand.Uint32()
		got := same(t, h, in).order
		if len(got) != 3 {
			t.Fatalf("%d answers %v, want 3", len(got), got)
		}
		first := slices.Index(healthy, got[0])
		if first < 0 {
			t.Fatalf("answer %v includes an unhealthy candidate", got)
		}
		for i, a := range got {
			if want := healthy[(first+i)%len(healthy)]; a != want {
				t.Fatalf("answers %v are not consecutive healthy slots", got)
			}
			seen[a]++
		}
	}
	// Each healthy candidate is in 3/7 of the answers: 857 of 2000
	// expected; a broken draw that skips any of them fails this.
	for _, a := range healthy {
		if seen[a] < 700 || seen[a] > 1020 {
			t.Errorf("candidate %d answered %d times in 2000, want 857±150", a, seen[a])
		}
	}
}

// TestDifferential: random record sets (every policy, weights, priorities,
// backups, regions, when_all_down) and health tables, for clients of two
// regions of a compiled geo config and a client of none, get the same
// answers in the same order from the XDP program's selection and the Go
// selection, the fallback's, for every one of a spread of draws and turns.
func TestDifferential(t *testing.T) {
	h := harness(t)
	g := geo.New(&config.Geo{Regions: []config.Region{
		{Name: "eu", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/25")}, Next: []string{"us"}},
		{Name: "us", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.128/25")}},
	}})
	orders := g.Orders()
	clients := []uint8{1, 2, 0}
	rng := rand.New(rand.NewPCG(1, 2))
	k := int(selection.K)
	for trial := range 400 {
		n := 1 + rng.IntN(k)
		if trial%4 == 3 {
			n = k + 1 + rng.IntN(int(selection.MaxCandidates)-k) // a pool
		}
		cs := make([]cand, n)
		for i := range cs {
			w := uint8(rng.IntN(256))
			if rng.IntN(4) == 0 {
				w = 0
			}
			cs[i] = cand{backup: rng.IntN(4) == 0, prio: uint8(rng.IntN(3)), weight: w}
		}
		cs[rng.IntN(n)].backup = false // config requires a primary
		s := set(bpf.SteadydnsPolicy(rng.IntN(4)), uint8(1+rng.IntN(int(selection.MaxAnswers))), cs...)
		s.WhenAllDown = uint8(rng.IntN(3))
		s.MinHealthy = uint8(rng.IntN(3))
		c := s.Candidates()
		for i := range n {
			c[i].Check = uint32(1 + rng.IntN(12))
		}
		in := input{Set: s, Up: make([]bool, 13), Meta: fresh, Now: now}
		in.Up[0] = true
		for i := 1; i <= 12; i++ {
			in.Up[i] = rng.IntN(2) == 0
		}
		if rng.IntN(2) == 0 {
			s.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_GEO)
			for i := range n {
				c[i].Region = uint8(rng.IntN(3))
			}
			// As XDP looks the client's region up in geo_rank.
			in.Order = &orders[clients[trial%len(clients)]]
		}
		for x := range uint32(64) {
			in.Rnd, in.Turn = x*0x9e3779b9, x
			same(t, h, in)
		}
	}
}

// chiSquare of observed counts against weights.
func chiSquare(counts map[int]int, weights map[int]float64, n int) float64 {
	var total float64
	for _, w := range weights {
		total += w
	}
	var x2 float64
	for k, w := range weights {
		e := float64(n) * w / total
		d := float64(counts[k]) - e
		x2 += d * d / e
	}
	return x2
}

// chi2Crit is the 0.999 quantile of chi-square with 3 degrees of freedom:
// a correct draw exceeds it once in a thousand runs; a draw that ignores
// the weights (uniform shares) scores in the thousands at this n.
const chi2Crit = 16.27

// TestWeightedShares: over 100,000 random draws both selections pick the
// same candidate, the picks follow the weights by a chi-square test, and
// weight 0 is never drawn while others are healthy.
func TestWeightedShares(t *testing.T) {
	h := harness(t)
	s := set(weighted, 8, cand{weight: 10}, cand{weight: 20}, cand{weight: 30}, cand{weight: 40}, cand{weight: 0})
	weights := map[int]float64{0: 10, 1: 20, 2: 30, 3: 40}
	in := input{Set: s, Up: table(), Meta: fresh, Now: now}
	const n = 100_000
	counts := map[int]int{}
	for range n {
		in.Rnd = rand.Uint32()
		p := same(t, h, in)
		if len(p.order) != 1 {
			t.Fatalf("weighted picked %v", p.order)
		}
		counts[p.order[0]]++
	}
	if counts[4] != 0 {
		t.Fatalf("weight 0 drawn %d times", counts[4])
	}
	if x2 := chiSquare(counts, weights, n); x2 > chi2Crit {
		t.Errorf("counts %v: chi2 %.2f > %.2f", counts, x2, chi2Crit)
	}
}

// TestRoundRobin: each healthy candidate comes first equally often, exactly,
// as the turn advances once per query; the down one never comes first.
func TestRoundRobin(t *testing.T) {
	h := harness(t)
	s := set(roundRobin, 2, cand{}, cand{}, cand{}, cand{})
	in := input{Set: s, Up: table(2), Meta: fresh, Now: now} // the third is down
	first := map[int]int{}
	const n = 3000
	for turn := range uint32(n) {
		in.Turn, in.Rnd = turn, rand.Uint32()
		got := same(t, h, in).order
		if len(got) != 2 {
			t.Fatalf("round robin answered %v, want 2", got)
		}
		first[got[0]]++
	}
	for _, a := range []int{0, 1, 3} {
		if c := first[a]; c != n/3 {
			t.Errorf("slot %d first %d times of %d, want %d (%v)", a, c, n, n/3, first)
		}
	}
	if first[2] != 0 {
		t.Errorf("the unhealthy candidate came first %d times", first[2])
	}
}
