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
	LoadNs   Summary // in-kernel ns per packet under kxdpgun
	Answered Summary // replies per second under kxdpgun
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

// rrlCells are the cells, in the order each round runs them. "off" with
// every name is the constant work's 0% level again, run in the same
// rounds as "on" so that their ratio is a same-run one.
var rrlCells = []struct {
	name    string
	oneName bool
	rrl     loader.RRL
	limited bool // the cell's queries must be limited; else none may be
}{
	{"off", false, loader.RRL{}, false},
	{"on", false, rrlUnder, false},
	{"on", true, rrlUnder, false},
	{"limited, slip 0", true, rrlFlood(0), true},
	{"limited, slip 2", true, rrlFlood(2), true},
}

// rrlPrograms loads the program once per cell with the cell's rate
// limiting, on the pins of opts (o's): the cells share o's records,
// health table, counters and rate-limit accounts, and take turns on o's
// link. A cell without rate limiting is o itself.
func rrlPrograms(o *loader.Objects, opts loader.Options) (progs []*loader.Objects, err error) {
	for _, c := range rrlCells {
		if c.rrl.Rate == 0 {
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
// every candidate up, in rounds; o's program is back on the link after.
func (r *rig) workRRL(ctx context.Context, w *Work, o *loader.Objects, progs []*loader.Objects, queries string, first, n, k int) (err error) {
	if err := writeWorkHealth(o, 0); err != nil {
		return err
	}
	one := filepath.Join(r.dir, fmt.Sprintf("work-%d-one.txt", n))
	if err := writeLines(one, func(b *bufio.Writer) { fmt.Fprintf(b, "%s A\n", nameOf(first)) }); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.attachWork(o)) }()
	samples := make([]sample, len(rrlCells))
	runs, limited, slipped := make([]uint64, len(rrlCells)), make([]uint64, len(rrlCells)), make([]uint64, len(rrlCells))
	for range r.o.Runs {
		for i, c := range rrlCells {
			p := progs[i]
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
			cost, answered, other, err := r.workRun(ctx, p.Steadydns, file)
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
		w.RRL = append(w.RRL, RRLResult{Names: n, K: k, Cell: c.name, OneName: c.oneName, Limited: share, Slipped: slipShare,
			LoadNs: summarize(samples[i].load), Answered: summarize(samples[i].answered)})
	}
	return nil
}

// attachWork puts p's program on the server's veth: it updates the link
// o's attach pinned, so the veth and its NAPI thread stay as they are.
func (r *rig) attachWork(p *loader.Objects) error {
	return r.env.Edge.Do(func() error { _, err := p.Attach(r.env.Edge.Link, loader.ModeNative); return err })
}
