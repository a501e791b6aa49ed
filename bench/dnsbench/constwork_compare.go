package dnsbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/loader"
)

// CompareResult is this build's XDP program against another build's
// (Options.CompareObject), for one zone size, K and query type, at
// Options.CompareDown.
type CompareResult struct {
	Names, K int
	DownPct  int           // the share of candidates down
	Qtype    string        // A or AAAA, without EDNS
	ThisNs   stats.Summary // this build's ns per packet under load, one figure per round's slice
	OtherNs  stats.Summary // the other build's, in the same rounds
	// Ratio is the other build's ns per packet over this build's, one
	// figure per pair of rounds, and RatioCI a 95% confidence interval
	// of its median (medianCI). Above 1, this build is the faster.
	Ratio   stats.Summary
	RatioCI [2]float64
}

// comparePrograms loads this build's program and the other build's once
// per pair of rounds onto o's maps, in turn, each pair starting with
// another of the two: progs[0] is this build's, progs[1] the other's.
// Like rrlPrograms, every pair has loads of its own, since a load's
// placement moves its run time by several percent.
func comparePrograms(o *loader.Objects, opts loader.Options, other string, pairs int) (progs [][]*ebpf.Program, err error) {
	progs = make([][]*ebpf.Program, 2)
	for pair := range pairs {
		for j := range 2 {
			i := (pair + j) % 2
			var p *ebpf.Program
			if i == 0 {
				p, err = o.LoadProgram(opts)
			} else {
				p, err = o.LoadProgramFrom(opts, other)
			}
			if err != nil {
				return progs, fmt.Errorf("loading the programs to compare: %w", err)
			}
			progs[i] = append(progs[i], p)
		}
	}
	return progs, nil
}

// measureCompare measures this build's program against the other build's
// under load, for A and AAAA queries over every name: the two take turns
// on the link within one generator run, in slices, as rate limiting's
// cells do (rrlRun), and the cost is read as a ratio within each pair of
// rounds. A change of a few percent is smaller than what separate runs of
// the generator differ by on a shared machine; paired slices see it.
func (r *rig) measureCompare(ctx context.Context, w *ConstantWork, o *loader.Objects, progs [][]*ebpf.Program, order []int, n, k int) (err error) {
	if err := writeLevel(o, r.o.CompareDown); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.reattach(o), writeLevel(o, 0)) }()
	for _, qtype := range []string{"A", "AAAA"} {
		file := filepath.Join(r.dir, fmt.Sprintf("work-%d-compare-%s.txt", n, qtype))
		err := writeLines(file, func(b *bufio.Writer) {
			for _, i := range order {
				fmt.Fprintf(b, "%s %s\n", nameOf(i), qtype)
			}
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(r.o.Log, "bench: against %s, %d names, K=%d, %s: %d rounds of %v slices\n", filepath.Base(r.o.CompareObject), n, k, qtype, r.o.RRLRounds, r.o.RRLSlice)
		var got []rrlSlices
		other, err := r.quietly(func() (err error) {
			got, err = r.rrlRun(ctx, o, progs, []int{0, 1}, file)
			return errors.Join(err, r.clientPass(false))
		})
		if err != nil {
			return fmt.Errorf("comparing builds, %d names, K=%d, %s: %w", n, k, qtype, err)
		}
		w.OtherLoad = max(w.OtherLoad, other)
		for i, s := range got {
			if s.runs == 0 || s.limited > 0 {
				return fmt.Errorf("comparing builds, %d names, K=%d, %s: build %d ran %d queries, %d over a rate limit", n, k, qtype, i, s.runs, s.limited)
			}
		}
		ratios := pairRatios(got[1].ns, got[0].ns)
		res := CompareResult{Names: n, K: k, DownPct: r.o.CompareDown, Qtype: qtype, ThisNs: stats.Summarize(got[0].ns), OtherNs: stats.Summarize(got[1].ns), Ratio: stats.Summarize(ratios)}
		res.RatioCI[0], res.RatioCI[1] = stats.MedianCI(ratios)
		w.Compare = append(w.Compare, res)
	}
	return nil
}
