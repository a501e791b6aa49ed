package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/loader"
)

// RRLResult is one cell of what response rate limiting costs under load:
// the program loaded without it, with it and no key over its limit, or
// with one key flooded far over its limit.
type RRLResult struct {
	Names, K int
	Cell     string  // what rrlCells calls it
	OneName  bool    // kxdpgun asks one name, so every query is one key; else every name once per pass
	Limited  float64 // share of the program's runs over the limit (slipped or dropped), over all rounds
	Slipped  float64 // share of those over the limit that went out truncated rather than dropped
	LoadNs   Summary // in-kernel ns per packet under kxdpgun, one figure per round
	Answered Summary // replies per second under kxdpgun
	// Reference is the cell this one is read against ("" for none), and
	// Ratio this cell's ns per packet over the reference's, one figure
	// per pair of rounds: the pair's two runs of this cell over the same
	// pair's two runs of the reference.
	Reference string
	Ratio     Summary
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
// same-run one. "off again" is the same program loaded a second time: its
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

// rrlPrograms loads the program once per cell with the cell's rate
// limiting, on the pins of opts (o's): the cells share o's records,
// health table, counters and rate-limit accounts, and take turns on o's
// link. The first cell is o itself; every other is a program of its own,
// "off again" too, so that it differs from "off" as "on" does, by being
// another load.
func rrlPrograms(o *loader.Objects, opts loader.Options) (progs []*loader.Objects, err error) {
	for i, c := range rrlCells {
		if i == 0 {
			progs = append(progs, o)
			continue
		}
		opts.RRL = c.rrl
		p, err := loader.Load(opts)
		if err != nil {
			return progs, fmt.Errorf("loading the program with rrl %q: %w", c.name, err)
		}
		progs = append(progs, p)
	}
	return progs, nil
}

// closePrograms closes what rrlPrograms loaded, but o.
func closePrograms(o *loader.Objects, progs []*loader.Objects) error {
	var err error
	for _, p := range progs {
		if p != o {
			err = errors.Join(err, p.Close())
		}
	}
	return err
}

// workRRL measures the rate-limiting cells of one size and K under load,
// every candidate up, in Options.RRLRounds rounds of RRLDuration per cell;
// o's program is back on the link after. RRL adds 15 to 50 ns to some
// 250, of the order of what a whole run moves by on a shared machine, so
// the cost is read as a ratio within each pair of rounds (forward, then
// reversed) and summed up by the median of the pairs' ratios.
func (r *rig) workRRL(ctx context.Context, w *Work, o *loader.Objects, progs []*loader.Objects, queries string, first, n, k int) (err error) {
	if err := writeWorkHealth(o, 0); err != nil {
		return err
	}
	one := filepath.Join(r.dir, fmt.Sprintf("work-%d-one.txt", n))
	if err := writeLines(one, func(b *bufio.Writer) { fmt.Fprintf(b, "%s A\n", nameOf(first)) }); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.attachWork(o)) }()
	secs := int(r.o.RRLDuration / time.Second)
	samples := make([]sample, len(rrlCells))
	runs, limited, slipped := make([]uint64, len(rrlCells)), make([]uint64, len(rrlCells)), make([]uint64, len(rrlCells))
	for round := range r.o.RRLRounds {
		fmt.Fprintf(r.o.Log, "bench: rate limiting, %d names, K=%d, round %d of %d\n", n, k, round+1, r.o.RRLRounds)
		for j := range rrlCells {
			i := j
			if round%2 == 1 {
				i = len(rrlCells) - 1 - j
			}
			c, p := rrlCells[i], progs[i]
			if err := r.attachWork(p); err != nil {
				return err
			}
			// Every cell starts from no accounts: a flood's would limit
			// the next cell's key.
			o.ClearRRL()
			file := queries
			if c.oneName {
				file = one
			}
			before, err := o.Outcomes()
			if err != nil {
				return err
			}
			cost, answered, other, err := r.workRun(ctx, p.Steadydns, file, secs)
			if err != nil {
				return err
			}
			after, err := o.Outcomes()
			if err != nil {
				return err
			}
			for j := range after {
				runs[i] += after[j] - before[j]
			}
			slipped[i] += after[bpf.SteadydnsOutcomeOUT_RRL_SLIPPED] - before[bpf.SteadydnsOutcomeOUT_RRL_SLIPPED]
			limited[i] += after[bpf.SteadydnsOutcomeOUT_RRL_SLIPPED] - before[bpf.SteadydnsOutcomeOUT_RRL_SLIPPED] +
				after[bpf.SteadydnsOutcomeOUT_RRL_DROPPED] - before[bpf.SteadydnsOutcomeOUT_RRL_DROPPED]
			w.OtherLoad = max(w.OtherLoad, other)
			samples[i].load, samples[i].answered = append(samples[i].load, cost), append(samples[i].answered, answered)
		}
	}
	for i, c := range rrlCells {
		if runs[i] == 0 {
			return fmt.Errorf("rrl cell %q, %d names, K=%d: the program counted no queries", c.name, n, k)
		}
		share := float64(limited[i]) / float64(runs[i])
		// A flooded key lets rate replies a second through (and its
		// first second's burst): limited, nearly every query must be.
		if c.limited && share < 0.9 || !c.limited && limited[i] > 0 {
			return fmt.Errorf("rrl cell %q, %d names, K=%d: %d of %d queries over the limit", c.name, n, k, limited[i], runs[i])
		}
		var slipShare float64
		if limited[i] > 0 {
			slipShare = float64(slipped[i]) / float64(limited[i])
		}
		res := RRLResult{Names: n, K: k, Cell: c.name, OneName: c.oneName, Limited: share, Slipped: slipShare,
			LoadNs: summarize(samples[i].load), Answered: summarize(samples[i].answered)}
		if c.ref >= 0 {
			res.Reference = rrlCells[c.ref].name
			res.Ratio = summarize(pairRatios(samples[i].load, samples[c.ref].load))
		}
		w.RRL = append(w.RRL, res)
	}
	return nil
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

// attachWork puts p's program on the server's veth: it updates the link
// o's attach pinned, so the veth and its NAPI thread stay as they are.
func (r *rig) attachWork(p *loader.Objects) error {
	return r.env.Edge.Do(func() error { _, err := p.Attach(r.env.Edge.Link, loader.ModeNative); return err })
}
