package dnsbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/loader"
)

// RRLResult is one cell of what response rate limiting costs under load:
// the program loaded without it, with it and no key over its limit, or
// with one key flooded far over its limit.
type RRLResult struct {
	Names, K int
	Cell     string        // what rrlCells calls it
	OneName  bool          // kxdpgun asks one name, so every query is one key; else every name once per pass
	Limited  float64       // share of the program's runs over the limit (slipped or dropped), over all rounds
	Slipped  float64       // share of those over the limit that went out truncated rather than dropped
	LoadNs   stats.Summary // in-kernel ns per packet under kxdpgun, one figure per round's slice
	Answered stats.Summary // replies per second the program sent (answers and truncated replies), per slice
	// Reference is the cell this one is read against ("" for none), and
	// Ratio this cell's ns per packet over the reference's, one figure
	// per pair of rounds: the pair's two runs of this cell over the same
	// pair's two runs of the reference.
	Reference string
	Ratio     stats.Summary
	// RatioCI is a 95% confidence interval of Ratio's median (medianCI):
	// what the median would move by in another run like this one.
	RatioCI [2]float64
}

// rrlUnder is rate limiting with a rate no key reaches: every reply is
// accounted and sent. It is above what a config may set (1,000,000) so
// that one name at the generator's full rate stays under it too; the
// program takes the same path at any rate under the limit.
var rrlUnder = loader.RRL{Rate: 100_000_000, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}

// rrlFlood is rate limiting at 10 replies a second: one name asked at
// the generator's rate is tens of thousands of times over it.
func rrlFlood(slip int) loader.RRL {
	return loader.RRL{Rate: 10, Slip: slip, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}
}

// rrlCells are the cells, in the order the first round of each pair runs
// them; the second runs them in reverse, so that a drift over the pair
// (the machine's other load, a warming cache) falls on a cell and its
// reference alike. "off" with every name is the constant work's 0% level
// again, run in the same rounds as "on" so that their ratio is a
// same-run one. "off again" is the same program in loads of its own: its
// ratio to "off" is the method's own noise, what two identical cells
// differ by, against which "on"'s rise is read.
var rrlCells = []struct {
	name    string
	oneName bool
	rrl     loader.RRL
	limited bool // the cell's queries must be limited; else none may be
	ref     int  // the index of the cell this one is read against, or -1
}{
	{"off", false, loader.RRL{}, false, -1},
	{"off again", false, loader.RRL{}, false, 0},
	{"on", false, rrlUnder, false, 0},
	{"on", true, rrlUnder, false, -1},
	{"limited, slip 0", true, rrlFlood(0), true, 3},
	{"limited, slip 2", true, rrlFlood(2), true, 3},
}

// rrlPrograms loads every cell's program once per pair of rounds, each
// with the cell's rate limiting, onto o's maps: the cells share o's
// records, health table, counters and rate-limit accounts, and take turns
// on o's link; o itself, the server's own load, is not measured. Every
// load is compiled anew, and the kernel puts each function of the image
// at a random offset within a 64-byte block, which moves a load's run
// time steadily, by as much as the cells differ. A pair of rounds with
// loads of its own is one draw of every cell's placement, so the median
// over the pairs reads the cells' code, not where one load of each
// landed. progs[cell][pair].
func rrlPrograms(o *loader.Objects, opts loader.Options, pairs int) (progs [][]*ebpf.Program, err error) {
	progs = make([][]*ebpf.Program, len(rrlCells))
	for pair := range pairs {
		// Each pair loads its cells starting from another, so that no
		// cell is always the first or last of a pair's loads.
		for j := range rrlCells {
			i := (pair + j) % len(rrlCells)
			c := rrlCells[i]
			opts.RRL = c.rrl
			p, err := o.LoadProgram(opts)
			if err != nil {
				return progs, fmt.Errorf("loading the program with rrl %q: %w", c.name, err)
			}
			progs[i] = append(progs[i], p)
		}
	}
	return progs, nil
}

// closePrograms closes what rrlPrograms loaded.
func closePrograms(progs [][]*ebpf.Program) error {
	var err error
	for _, ps := range progs {
		for _, p := range ps {
			err = errors.Join(err, p.Close())
		}
	}
	return err
}

// measureRRL measures the rate-limiting cells of one size and K under load,
// every candidate up; o's program is back on the link after. RRL adds a
// few percent, less than a whole run moves by on a shared machine, so
// the cells do not each get a run of the generator: the cells that ask
// the same queries share one run, and take turns on the link in slices of Options.RRLSlice, Options.RRLRounds rounds of one slice per
// cell, every second round in reverse, each pair of rounds with loads of
// its own (rrlPrograms). The kernel keeps each program's run time apart,
// so each slice's ns per packet is its own program's, and a disturbance
// from outside that lasts a second or more falls on every cell of a round
// alike. The cost is read as a ratio within each pair of rounds and summed
// up by the median of the pairs.
func (r *rig) measureRRL(ctx context.Context, w *ConstantWork, o *loader.Objects, progs [][]*ebpf.Program, queries string, first, n, k int) (err error) {
	if err := writeLevel(o, 0); err != nil {
		return err
	}
	one := filepath.Join(r.dir, fmt.Sprintf("work-%d-one.txt", n))
	if err := writeLines(one, func(b *bufio.Writer) { fmt.Fprintf(b, "%s A\n", nameOf(first)) }); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.reattach(o)) }()
	meas := make([]rrlSlices, len(rrlCells))
	for _, oneName := range []bool{false, true} {
		var cells []int
		for i, c := range rrlCells {
			if c.oneName == oneName {
				cells = append(cells, i)
			}
		}
		file := queries
		if oneName {
			file = one
		}
		fmt.Fprintf(r.o.Log, "bench: rate limiting, %d names, K=%d, one name %v: %d rounds of %v slices\n", n, k, oneName, r.o.RRLRounds, r.o.RRLSlice)
		var got []rrlSlices
		other, err := r.quietly(func() (err error) {
			got, err = r.rrlRun(ctx, o, progs, cells, file)
			return errors.Join(err, r.clientPass(false))
		})
		if err != nil {
			return fmt.Errorf("rate limiting, %d names, K=%d: %w", n, k, err)
		}
		w.OtherLoad = max(w.OtherLoad, other)
		for j, i := range cells {
			meas[i] = got[j]
		}
	}
	for i, c := range rrlCells {
		sl := meas[i]
		if sl.runs == 0 {
			return fmt.Errorf("rrl cell %q, %d names, K=%d: the program counted no queries", c.name, n, k)
		}
		share := float64(sl.limited) / float64(sl.runs)
		// A flooded key lets rate replies a second through (and its
		// first second's burst): limited, nearly every query must be.
		if c.limited && share < 0.9 || !c.limited && sl.limited > 0 {
			return fmt.Errorf("rrl cell %q, %d names, K=%d: %d of %d queries over the limit", c.name, n, k, sl.limited, sl.runs)
		}
		var slipShare float64
		if sl.limited > 0 {
			slipShare = float64(sl.slipped) / float64(sl.limited)
		}
		res := RRLResult{Names: n, K: k, Cell: c.name, OneName: c.oneName, Limited: share, Slipped: slipShare,
			LoadNs: stats.Summarize(sl.ns), Answered: stats.Summarize(sl.replies)}
		if c.ref >= 0 {
			res.Reference = rrlCells[c.ref].name
			ratios := pairRatios(sl.ns, meas[c.ref].ns)
			res.Ratio = stats.Summarize(ratios)
			res.RatioCI[0], res.RatioCI[1] = stats.MedianCI(ratios)
		}
		w.RRL = append(w.RRL, res)
	}
	return nil
}

// rrlSlices is what one cell's slices measured: ns per packet and replies
// a second, one figure per round, and the program's outcomes over all of
// them.
type rrlSlices struct {
	ns, replies            []float64
	runs, limited, slipped uint64
}

// rrlRun runs the generator once asking file's queries and, while it
// runs, gives the link to the programs of cells in turn, a slice each per
// round; see measureRRL.
func (r *rig) rrlRun(ctx context.Context, o *loader.Objects, progs [][]*ebpf.Program, cells []int, file string) ([]rrlSlices, error) {
	if err := r.swapProgram(o, progs[cells[0]][0]); err != nil {
		return nil, err
	}
	return r.slicedRun(ctx, o, len(cells), file, func(j, round int) (rrlSliceResult, error) {
		return r.rrlSlice(o, progs[cells[j]][round/2])
	})
}

// slicedRun runs the generator once asking file's queries and, while it
// runs, measures cells 0 … n-1 in turn, one slice each per round of
// Options.RRLRounds, every second round in reverse: slice readies cell j
// for its slice in the given round and measures it. A slice without a
// query (the generator stalled) runs again.
func (r *rig) slicedRun(ctx context.Context, o *loader.Objects, n int, file string, slice func(j, round int) (rrlSliceResult, error)) ([]rrlSlices, error) {
	base, err := o.Outcomes()
	if err != nil {
		return nil, err
	}
	// kxdpgun takes whole seconds: four times the slices' time, for the
	// attaching and reading between slices on a loaded machine, and time
	// to start. It is stopped once the slices are done.
	need := time.Duration(r.o.RRLRounds*n) * r.o.RRLSlice
	secs := 4*int((need+time.Second-1)/time.Second) + rrlStart
	start := time.Now()
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	gun := make(chan error, 1)
	go func() {
		_, err := r.kxdpgun(gctx, r.env.Edge.V4, file, r.o.Rate, secs)
		if gctx.Err() != nil && ctx.Err() == nil {
			err = nil // stopped here, without its totals
		}
		gun <- err
	}()
	if err := rrlWaitLoad(o, base, gun); err != nil {
		stop()
		return nil, errors.Join(err, <-gun)
	}
	out := make([]rrlSlices, n)
	for round := range r.o.RRLRounds {
		for j := range n {
			if round%2 == 1 {
				j = n - 1 - j
			}
			var s rrlSliceResult
			for try := 0; ; try++ {
				if s, err = slice(j, round); err != nil {
					stop()
					return nil, errors.Join(err, <-gun)
				}
				if s.runs > 0 {
					break
				}
				// No query in the slice: the generator stalled (on a
				// loaded machine), and the slice runs again, or it ended.
				select {
				case err := <-gun:
					return nil, errors.Join(fmt.Errorf("the generator ended after %v, in round %d of %d", time.Since(start).Round(time.Second), round+1, r.o.RRLRounds), err)
				default:
				}
				if try == rrlTries {
					stop()
					return nil, errors.Join(fmt.Errorf("round %d: %d slices in a row without a query", round+1, rrlTries+1), <-gun)
				}
			}
			c := &out[j]
			c.ns, c.replies = append(c.ns, s.ns), append(c.replies, s.replies)
			c.runs, c.limited, c.slipped = c.runs+s.runs, c.limited+s.limited, c.slipped+s.slipped
		}
	}
	stop()
	return out, <-gun
}

// rrlHandover is how long a slice waits after attaching o's program before
// it clears the accounts; polls last microseconds.
const rrlHandover = 20 * time.Millisecond

// rrlTries is how many times a slice without a query runs again: some
// seconds of slices, for a loaded machine on which kxdpgun runs but its
// queries stall.
const rrlTries = 40

// rrlStart is how many seconds the generator's run has beyond the slices:
// kxdpgun attaches its own program before it sends, and the slices start
// once the first queries arrive.
const rrlStart = 3

// rrlWaitLoad waits until the program answers beyond base, or the
// generator ends first; it leaves the generator's result in gun. Answers,
// not any outcome: a stray frame on the link (a neighbour solicitation) is
// counted too, and passed.
func rrlWaitLoad(o *loader.Objects, base []uint64, gun chan error) error {
	deadline := time.Now().Add(rrlStart * time.Second)
	for time.Now().Before(deadline) {
		now, err := o.Outcomes()
		if err != nil {
			return err
		}
		if now[bpf.SteadydnsOutcomeOUT_ANSWERED] > base[bpf.SteadydnsOutcomeOUT_ANSWERED] {
			return nil
		}
		select {
		case err := <-gun:
			gun <- err
			return errors.New("the generator ended before its queries arrived")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("no queries answered within %ds of starting the generator", rrlStart)
}

// rrlSliceResult is one slice of one program.
type rrlSliceResult struct {
	ns, replies            float64
	runs, limited, slipped uint64
}

// rrlSlice clears the accounts (a flood's would limit the next cell's
// key), puts prog on o's link, and measures prog for one slice. It clears
// them while o's program, which keeps no accounts, has the link, and
// rrlHandover after attaching it, when no poll still runs the previous
// program: a program charging a key while the table is cleared can read
// the flood's account before the clearing and write it back after.
func (r *rig) rrlSlice(o *loader.Objects, prog *ebpf.Program) (rrlSliceResult, error) {
	if err := r.reattach(o); err != nil {
		return rrlSliceResult{}, err
	}
	time.Sleep(rrlHandover)
	o.ClearRRL()
	if err := r.swapProgram(o, prog); err != nil {
		return rrlSliceResult{}, err
	}
	return r.measureSlice(o, prog)
}

// measureSlice measures prog, on the link, for one slice: its run-time
// statistics and the outcome counters of o's maps at either end. Its runs
// are the statistics' count: the reflector and the table read, which
// take slices too (measureBreakdown), count no outcome.
func (r *rig) measureSlice(o *loader.Objects, prog *ebpf.Program) (rrlSliceResult, error) {
	before, out0, err := sliceCounts(o, prog)
	if err != nil {
		return rrlSliceResult{}, err
	}
	start := time.Now()
	time.Sleep(r.o.RRLSlice)
	after, out1, err := sliceCounts(o, prog)
	if err != nil {
		return rrlSliceResult{}, err
	}
	took := time.Since(start).Seconds()
	d := func(i bpf.SteadydnsOutcome) uint64 { return out1[i] - out0[i] }
	slipped := d(bpf.SteadydnsOutcomeOUT_RRL_SLIPPED)
	return rrlSliceResult{
		ns:      nsPerRun(before, after),
		replies: float64(d(bpf.SteadydnsOutcomeOUT_ANSWERED)+slipped) / took,
		runs:    after.RunCount - before.RunCount,
		limited: slipped + d(bpf.SteadydnsOutcomeOUT_RRL_DROPPED),
		slipped: slipped,
	}, nil
}

// sliceCounts reads what a slice is measured by, at either end: prog's
// run-time statistics and the outcome counters of o's maps.
func sliceCounts(o *loader.Objects, prog *ebpf.Program) (*ebpf.ProgramStats, []uint64, error) {
	st, err := prog.Stats()
	if err != nil {
		return nil, nil, fmt.Errorf("reading program stats: %w", err)
	}
	out, err := o.Outcomes()
	return st, out, err
}

// pairRatios divides x by ref pair of rounds by pair: (x[2p] + x[2p+1]) /
// (ref[2p] + ref[2p+1]). Within a pair, one cell ran before the other in
// the first round and after it in the second, so a drift that is linear
// over the pair adds the same to both sums.
func pairRatios(x, ref []float64) []float64 {
	var out []float64
	for p := 0; p+1 < len(x) && p+1 < len(ref); p += 2 {
		if d := ref[p] + ref[p+1]; d > 0 {
			out = append(out, (x[p]+x[p+1])/d)
		}
	}
	return out
}

// pairDiffs is pairRatios' difference: x less ref per slice, pair of
// rounds by pair, ((x[2p] + x[2p+1]) - (ref[2p] + ref[2p+1])) / 2.
func pairDiffs(x, ref []float64) []float64 {
	var out []float64
	for p := 0; p+1 < len(x) && p+1 < len(ref); p += 2 {
		out = append(out, (x[p]+x[p+1]-ref[p]-ref[p+1])/2)
	}
	return out
}

// reattach puts p's own program back on the server's veth: it updates the link
// o's attach pinned, so the veth and its NAPI thread stay as they are.
func (r *rig) reattach(p *loader.Objects) error {
	return r.env.Edge.Do(func() error { _, err := p.Attach(r.env.Edge.Link, loader.ModeNative); return err })
}

// swapProgram puts prog on the link o's attach pinned on the server's veth.
func (r *rig) swapProgram(o *loader.Objects, prog *ebpf.Program) error {
	return r.env.Edge.Do(func() error { return o.SwapProgram(r.env.Edge.Link, prog) })
}
