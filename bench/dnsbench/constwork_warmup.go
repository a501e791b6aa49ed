package dnsbench

import (
	"context"
	"fmt"
	"math"

	"github.com/steadydns/steadydns/loader"
)

// WarmupResult is the runs under load that came before one size's and
// K's cells, every candidate up, right after their record sets were
// written: a table's fresh memory answers slower at first, and the
// cells measure the steady state.
type WarmupResult struct {
	Names, K int
	LoadNs   []float64 // ns per packet of each run, in order
	Settled  bool      // the last run was within warmTolerance of the one before
}

// Warm-up bounds: runs until one is within warmTolerance of the run
// before it, at least two and at most warmMaxRuns.
const (
	warmTolerance = 0.10
	warmMaxRuns   = 6
)

// warmUp runs the A queries under load with every candidate up until
// the cost per packet stops falling, and records the runs. A run that
// did not settle within warmMaxRuns is reported, not fatal: the cells
// still measure, and the report says the table had not settled.
func (r *rig) warmUp(ctx context.Context, w *ConstantWork, o *loader.Objects, queries string, n, k int) error {
	if err := writeLevel(o, 0); err != nil {
		return err
	}
	res := WarmupResult{Names: n, K: k}
	for len(res.LoadNs) < warmMaxRuns && !res.Settled {
		cost, _, other, err := r.quietLoadRun(ctx, o.Steadydns, queries)
		if err != nil {
			return fmt.Errorf("warming up %d names, K=%d: %w", n, k, err)
		}
		w.OtherLoad = max(w.OtherLoad, other)
		if l := len(res.LoadNs); l > 0 {
			res.Settled = math.Abs(cost-res.LoadNs[l-1]) <= warmTolerance*res.LoadNs[l-1]
		}
		res.LoadNs = append(res.LoadNs, cost)
	}
	fmt.Fprintf(r.o.Log, "bench: warm-up, %d names, K=%d: %.0f ns/packet, settled %v\n", n, k, res.LoadNs, res.Settled)
	w.Warmup = append(w.Warmup, res)
	return nil
}
