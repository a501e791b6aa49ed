package xdprules_test

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/selection/xdprules"
)

// TestRRLMatchesXDP: the fallback's rules of rate limiting (bpf.RRLHash,
// bpf.RRLRule.Charge) are the program's (rrl_hash, rrl_charge): from the
// same set, every charge of a random sequence gives the same hash,
// verdict and set after, for rules with and without slip. The sequences
// share one set among more keys than it has ways, so that keys are added,
// found and replaced, and their clocks jump, burst and idle past the
// window.
func TestRRLMatchesXDP(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	rules := []bpf.RRLRule{
		{IntervalNs: uint64(time.Second / 5), WindowNs: uint64(15 * time.Second), Slip: 2},
		{IntervalNs: uint64(time.Second / 5), WindowNs: uint64(time.Second), Slip: 0},
		{IntervalNs: uint64(time.Second / 3), WindowNs: uint64(2 * time.Second), Slip: 1},
		{IntervalNs: uint64(time.Second / 50), WindowNs: uint64(5 * time.Second), Slip: 3},
		{IntervalNs: uint64(time.Second), WindowNs: uint64(time.Second), Slip: 10},
	}
	rng := rand.New(rand.NewPCG(11, 4))
	verdicts := map[bpf.SteadydnsRrlVerdict]int{}
	for _, rule := range rules {
		h, err := xdprules.LoadRRL(rule)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		type key struct {
			client, resp uint64
			v6           bool
		}
		keys := make([]key, 7)
		for i := range keys {
			keys[i] = key{rng.Uint64(), rng.Uint64(), rng.IntN(2) == 1}
		}
		// Two keys of one family and prefix, told apart by the family
		// alone.
		keys[1] = key{keys[0].client, keys[0].resp, !keys[0].v6}
		seed := rng.Uint64()
		now := uint64(3 * time.Hour)
		var c, g bpf.SteadydnsRrlSet
		for step := range 3000 {
			switch r := rng.IntN(100); {
			case r < 60: // a burst: same instant
			case r < 95:
				now += rng.Uint64N(rule.IntervalNs * 2)
			default:
				now += rule.WindowNs + rng.Uint64N(uint64(time.Second))
			}
			k := keys[rng.IntN(len(keys))]
			// Mostly the first three keys, so that some go over.
			if rng.IntN(2) == 0 {
				k = keys[rng.IntN(3)]
			}
			got, err := h.Charge(c, seed, k.client, k.v6, k.resp, now)
			if err != nil {
				t.Fatal(err)
			}
			hash := bpf.RRLHash(seed, k.client, k.v6, k.resp)
			want := rule.Charge(&g, hash, now)
			if got.Hash != hash || got.Verdict != want || got.Set != g {
				t.Fatalf("rule %+v, step %d, key %+v at %d:\nprogram: hash %#x, verdict %d, set %+v\nGo:      hash %#x, verdict %d, set %+v",
					rule, step, k, now, got.Hash, got.Verdict, got.Set, hash, want, g)
			}
			c = got.Set
			verdicts[want]++
		}
	}
	// The sequences reached every verdict, so each branch was compared.
	for _, v := range []bpf.SteadydnsRrlVerdict{bpf.SteadydnsRrlVerdictRRL_SEND, bpf.SteadydnsRrlVerdictRRL_SLIP, bpf.SteadydnsRrlVerdictRRL_DROP} {
		if verdicts[v] == 0 {
			t.Errorf("no charge came to verdict %d: the sequences miss a branch", v)
		}
	}
}
