package dnsbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/loader"
)

// SkewResult is the program against the reflector for one query mix:
// uniform (every name once per pass) or Zipf (a few names take most
// queries, as real authoritative traffic does), all candidates up.
type SkewResult struct {
	Names, K int
	Mix      string  // "uniform" or "zipf"
	Top1Pct  float64 // share of the queries that ask the hottest 1% of the names
	// ProgramNs and ReflectorNs are ns per packet under load, one figure
	// per round's slice; OverReflector the ratio per pair of rounds.
	ProgramNs, ReflectorNs stats.Summary
	OverReflector          stats.Summary
	OverReflectorCI        [2]float64
}

// skewQueries is the fewest queries a Zipf file holds: enough that even
// the 1,000-name zone's tail is asked more than once.
const skewQueries = 1 << 17

// zipf draws ranks 0 … n-1 with exponent 1, P(i) ∝ 1/(i+1): a name's share
// falls as one over its rank, the shape of DNS popularity. math/rand's Zipf
// takes exponents above 1 only; this inverts the cumulative distribution.
type zipf struct{ cdf []float64 }

func newZipf(n int) zipf {
	cdf := make([]float64, n)
	var sum float64
	for i := range cdf {
		sum += 1 / float64(i+1)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	cdf[n-1] = 1 // no rounding may leave a u in [0, 1) past the end
	return zipf{cdf}
}

// rank is the rank whose slice of the cumulative distribution holds u in
// [0, 1).
func (z zipf) rank(u float64) int { return sort.SearchFloat64s(z.cdf, u) }

// zipfDraws draws count ranks of n names from rng.
func zipfDraws(rng *rand.Rand, n, count int) []int {
	z := newZipf(n)
	out := make([]int, count)
	for i := range out {
		out[i] = z.rank(rng.Float64())
	}
	return out
}

// topShare is the share of draws whose rank is among the hottest 1% of n
// (at least one name).
func topShare(draws []int, n int) float64 {
	top := max(1, n/100)
	var c int
	for _, d := range draws {
		if d < top {
			c++
		}
	}
	return float64(c) / float64(len(draws))
}

// measureSkew measures the program and the reflector under the uniform
// mix, then under the Zipf mix, each mix in one kxdpgun run in which the
// two take turns on the link in paired slices (rrlRun), as the table read
// is measured: each mix's ratio is read within its own run. A rank maps to
// a name through order, so the hottest names lie anywhere in the table.
func (r *rig) measureSkew(ctx context.Context, w *ConstantWork, o *loader.Objects, progs [][]*ebpf.Program, queries string, order []int, n, k int) (err error) {
	if err := writeLevel(o, 0); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.reattach(o)) }()
	rng := rand.New(rand.NewPCG(5, uint64(n)))
	draws := zipfDraws(rng, n, max(n, skewQueries))
	zfile := filepath.Join(r.dir, fmt.Sprintf("work-%d-zipf.txt", n))
	err = writeLines(zfile, func(b *bufio.Writer) {
		for _, d := range draws {
			fmt.Fprintf(b, "%s A\n", nameOf(order[d]))
		}
	})
	if err != nil {
		return err
	}
	for _, mix := range []struct {
		name, file string
		top        float64
	}{{"uniform", queries, float64(max(1, n/100)) / float64(n)}, {"zipf", zfile, topShare(draws, n)}} {
		fmt.Fprintf(r.o.Log, "bench: %s mix, %d names, K=%d: %d rounds of %v slices\n", mix.name, n, k, r.o.RRLRounds, r.o.RRLSlice)
		var got []rrlSlices
		other, err := r.quietly(func() (err error) {
			got, err = r.rrlRun(ctx, o, progs, []int{cellProgram, cellReflector}, mix.file)
			return errors.Join(err, r.clientPass(false))
		})
		if err != nil {
			return fmt.Errorf("the %s mix, %d names, K=%d: %w", mix.name, n, k, err)
		}
		w.OtherLoad = max(w.OtherLoad, other)
		prog, refl := got[0].ns, got[1].ns
		ratios := pairRatios(prog, refl)
		res := SkewResult{Names: n, K: k, Mix: mix.name, Top1Pct: mix.top,
			ProgramNs: stats.Summarize(prog), ReflectorNs: stats.Summarize(refl), OverReflector: stats.Summarize(ratios)}
		res.OverReflectorCI[0], res.OverReflectorCI[1] = stats.MedianCI(ratios)
		w.Skew = append(w.Skew, res)
	}
	return nil
}
