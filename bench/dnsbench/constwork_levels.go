package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/loader"
)

// LevelResult is one health level of one size and K measured in paired
// slices (measureLevelSlices): its ns per packet against 0% down's in the
// same rounds.
type LevelResult struct {
	Names, K, DownPct int
	Answers           int
	LoadNs            stats.Summary // ns per packet under load, one figure per round's slice
	// Ratio is this level's ns per packet over 0% down's, one figure per
	// pair of rounds, and RatioCI a 95% confidence interval of its median
	// (medianCI). The same program runs at every level; only the table
	// differs.
	Ratio   stats.Summary
	RatioCI [2]float64
}

// measureLevelSlices measures the health levels of one size and K under
// load as the rate-limiting cells are measured: one generator run, the
// levels taking turns within it in slices, each slice starting with its level's
// table pushed. Separate runs of the generator differ by more than the
// levels could on a shared machine, so the spread across levels that measureLevels reports reads the
// host as much as the program; within a pair of rounds, a drift falls on
// every level alike. The program on the link stays o's own.
func (r *rig) measureLevelSlices(ctx context.Context, w *ConstantWork, o *loader.Objects, queries string, n, k int) (err error) {
	tables := make([][]byte, len(healthLevels))
	for i, down := range healthLevels {
		tables[i] = levelTable(o, down)
	}
	if err := r.reattach(o); err != nil {
		return err
	}
	// The levels after this leave the table at 0% down, as the other
	// measurements of this size and K expect.
	defer func() { err = errors.Join(err, writeLevel(o, 0)) }()
	fmt.Fprintf(r.o.Log, "bench: health levels, %d names, K=%d: %d rounds of %v slices\n", n, k, r.o.RRLRounds, r.o.RRLSlice)
	var got []rrlSlices
	other, err := r.quietly(func() (err error) {
		got, err = r.slicedRun(ctx, o, len(healthLevels), queries, func(j, _ int) (rrlSliceResult, error) {
			if err := pushTable(o, tables[j]); err != nil {
				return rrlSliceResult{}, err
			}
			// A poll that read the previous table may still be
			// answering; the slice starts after it.
			time.Sleep(rrlHandover)
			return r.measureSlice(o, o.Steadydns)
		})
		return errors.Join(err, r.clientPass(false))
	})
	if err != nil {
		return fmt.Errorf("health levels in slices, %d names, K=%d: %w", n, k, err)
	}
	w.OtherLoad = max(w.OtherLoad, other)
	for i, down := range healthLevels {
		s := got[i]
		if s.runs == 0 || s.limited > 0 {
			return fmt.Errorf("health levels in slices, %d names, K=%d, %d%% down: %d queries, %d over a rate limit", n, k, down, s.runs, s.limited)
		}
		ratios := pairRatios(s.ns, got[0].ns)
		res := LevelResult{Names: n, K: k, DownPct: down, Answers: expectedAnswers(k, down, r.o),
			LoadNs: stats.Summarize(s.ns), Ratio: stats.Summarize(ratios)}
		res.RatioCI[0], res.RatioCI[1] = stats.MedianCI(ratios)
		w.Levels = append(w.Levels, res)
	}
	return nil
}

// levelTable is a health table with down% of the candidates' entries
// down: none, all, or one of each pair of entries (checkOf), which one
// drawn from the pair's hash. A set of K > 1 candidates then has K/2
// up, in one of 2^(K/2) arrangements that varies from name to name as
// real failures do, and with K = 1 half the names are up in no pattern: a program whose
// branches followed health would mispredict them, where the same
// candidates down in every set would let it learn the pattern.
func levelTable(o *loader.Objects, down int) []byte {
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	healthtable.Put(table, 0, true, 0)
	for i := 1; i < o.HealthCapacity(); i++ {
		pair, second := uint64(i-1)/2, uint64(i-1)&1
		// The top bit of a multiplicative hash: 2^64 over the golden ratio.
		up := down == 0 || down == 50 && second == (pair*0x9E3779B97F4A7C15)>>63
		healthtable.Put(table, uint32(i), up, 0)
	}
	return table
}
