package bpf_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
)

// chiSquare of observed counts against weights.
func chiSquare(counts map[string]int, weights map[string]float64, n int) float64 {
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

func weightedSet() (*bpf.SteadydnsRrset, map[string]float64) {
	v := rrset(60, 8,
		cand{addr: "198.18.6.1", weight: 10},
		cand{addr: "198.18.6.2", weight: 20},
		cand{addr: "198.18.6.3", weight: 30},
		cand{addr: "198.18.6.4", weight: 40},
		cand{addr: "198.18.6.5", weight: 0},
	)
	v.Policy = uint8(bpf.SteadydnsPolicyPOLICY_WEIGHTED)
	return v, map[string]float64{"198.18.6.1": 10, "198.18.6.2": 20, "198.18.6.3": 30, "198.18.6.4": 40}
}

// TestWeightedShares: 100,000 XDP answers follow the weights by a
// chi-square test, and weight 0 is never drawn while others are healthy.
// It tests the program's random source; controlplane/selection tests the
// draw itself on both sides.
// STEADYDNS_CHI_RUNS=100 repeats it to measure how often a correct
// implementation fails.
func TestWeightedShares(t *testing.T) {
	o := load(t)
	v, weights := weightedSet()
	put(t, o, "w.example.test.", dns.TypeA, v)
	setHealth(t, o)
	runs := 1
	if s := os.Getenv("STEADYDNS_CHI_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	const n = 100_000
	failures := 0
	for range runs {
		counts := map[string]int{}
		for range n {
			got := answers(t, o, "w.example.test.")
			if len(got) != 1 {
				t.Fatalf("weighted answered %v, want one record", got)
			}
			counts[got[0]]++
		}
		if counts["198.18.6.5"] != 0 {
			t.Fatalf("weight 0 drawn %d times while others were healthy", counts["198.18.6.5"])
		}
		x2 := chiSquare(counts, weights, n)
		t.Logf("xdp counts %v chi2 %.2f", counts, x2)
		if x2 > chi2Crit {
			failures++
		}
	}
	if runs > 1 {
		t.Logf("%d of %d runs exceeded chi2 %.2f", failures, runs, chi2Crit)
	}
	if failures > runs/50 {
		t.Errorf("%d of %d runs exceeded chi2 %.2f", failures, runs, chi2Crit)
	}
}

// TestRoundRobin: on one CPU, each healthy candidate comes first equally
// often, exactly, since the per-CPU turn advances once per query. The
// selection's use of the turn is tested in controlplane/selection; this is
// the program's per-CPU counter.
func TestRoundRobin(t *testing.T) {
	o := load(t)
	pinCPU(t, 0)
	v := rrset(60, 2, cand{addr: "198.18.7.1", check: 1}, cand{addr: "198.18.7.2", check: 2}, cand{addr: "198.18.7.3", check: 3}, cand{addr: "198.18.7.4", check: 4})
	v.Policy = uint8(bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN)
	put(t, o, "rr.example.test.", dns.TypeA, v)
	setHealth(t, o, 1, 2, 4) // the third is down
	first := map[string]int{}
	const n = 3000
	for range n {
		got := answers(t, o, "rr.example.test.")
		if len(got) != 2 {
			t.Fatalf("round robin answered %v, want 2", got)
		}
		first[got[0]]++
	}
	for _, a := range []string{"198.18.7.1", "198.18.7.2", "198.18.7.4"} {
		if c := first[a]; c < n/3-1 || c > n/3+1 {
			t.Errorf("%s first %d times of %d, want %d±1 (%v)", a, c, n, n/3, first)
		}
	}
	if first["198.18.7.3"] != 0 {
		t.Errorf("the unhealthy candidate came first %d times", first["198.18.7.3"])
	}
}
