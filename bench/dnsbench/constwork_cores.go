package dnsbench

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/loader"
)

// CoresResult is how the program scales from one CPU to two, through
// BPF_PROG_RUN: a query's cost on one CPU alone against its cost with the
// other CPU running the same program at the same time, all candidates up.
type CoresResult struct {
	Names, K int
	Cell     string // what coreCells calls it
	// AloneNs and TogetherNs are ns per query, the loop's own cost
	// subtracted, one figure per pair of rounds: alone the mean of the two
	// CPUs each running by itself, together the mean of both at once.
	AloneNs, TogetherNs stats.Summary
	// Scaling is how many times one CPU's queries two answer, 2 × alone /
	// together, one figure per pair of rounds.
	Scaling   stats.Summary
	ScalingCI [2]float64
}

// secondClient asks from another /24 than the client, so that under rate
// limiting it has accounts of its own.
var secondClient = netip.MustParseAddr("198.18.2.1")

// coreCells are the two-CPU cells: every name without rate limiting; with
// it, each CPU a client of its own, as RSS spreads clients over queues;
// and with it, both CPUs one client asking one name, so that every query
// on both writes one account: the worst case of RRL's writes. prog
// indexes rrlCells, whose programs the cells borrow.
var coreCells = []struct {
	name    string
	prog    int
	oneName bool
	apart   bool // the second CPU's queries come from secondClient
}{
	{"every name", 0, false, true},
	{"rrl on, a client per CPU", 2, false, true},
	{"rrl on, one client's name on both", 2, true, false},
}

// measureCores measures each of coreCells on the server's and the
// generator's CPUs, alone and together, in Options.RRLRounds/2 pairs of
// rounds, each pair with loads of its own of the cell's program (the
// rate-limiting cells' loads), the second round of a pair running together
// first. A line written by every query on both CPUs shows as a dearer
// query together. Nothing else runs on the link meanwhile.
func (r *rig) measureCores(o *loader.Objects, progs [][]*ebpf.Program, frames, apart [][]byte, n, k int) ([]CoresResult, error) {
	if err := writeLevel(o, 0); err != nil {
		return nil, err
	}
	cpus := [2]int{r.o.ServerCPU, r.o.GenCPU}
	passIn := [2][][]byte{frames[:1], frames[:1]}
	alone := make([][]float64, len(coreCells))
	together := make([][]float64, len(coreCells))
	scaling := make([][]float64, len(coreCells))
	for pair := range r.o.RRLRounds / 2 {
		var base1, base2 float64
		for round := range 2 {
			one, both, err := r.coreRun(r.pass.XdpPass, passIn, cpus, 2 /* XDP_PASS */, round == 1)
			if err != nil {
				return nil, fmt.Errorf("timing XDP_PASS on two CPUs: %w", err)
			}
			base1, base2 = base1+one/2, base2+both/2
		}
		for i, c := range coreCells {
			in := [2][][]byte{frames, frames}
			if c.apart {
				in[1] = apart
			}
			if c.oneName {
				in = [2][][]byte{frames[:1], frames[:1]}
			}
			var t1, t2 float64
			for round := range 2 {
				one, both, err := r.coreRun(progs[c.prog][pair], in, cpus, xdpTX, round == 1)
				if err != nil {
					return nil, fmt.Errorf("two CPUs, %d names, K=%d, %s: %w", n, k, c.name, err)
				}
				t1, t2 = t1+(one-base1)/2, t2+(both-base2)/2
			}
			alone[i], together[i] = append(alone[i], t1), append(together[i], t2)
			scaling[i] = append(scaling[i], 2*t1/t2)
		}
	}
	var out []CoresResult
	for i, c := range coreCells {
		res := CoresResult{Names: n, K: k, Cell: c.name, AloneNs: stats.Summarize(alone[i]),
			TogetherNs: stats.Summarize(together[i]), Scaling: stats.Summarize(scaling[i])}
		res.ScalingCI[0], res.ScalingCI[1] = stats.MedianCI(scaling[i])
		out = append(out, res)
	}
	return out, nil
}

// coreRun times prog on each of cpus by itself, then on both at once (or
// together first), Options.Iterations calls a CPU each time, and returns
// the ns per call alone (the two CPUs' mean) and together.
func (r *rig) coreRun(prog *ebpf.Program, in [2][][]byte, cpus [2]int, want uint32, togetherFirst bool) (alone, together float64, err error) {
	runAlone := func() error {
		for j, cpu := range cpus {
			ns, err := progRunNs(prog, in[j], r.o.Iterations, cpu, want)
			if err != nil {
				return err
			}
			alone += ns / 2
		}
		return nil
	}
	runTogether := func() (err error) {
		together, err = progRunBoth(prog, in, cpus, r.o.Iterations, want)
		return err
	}
	order := []func() error{runAlone, runTogether}
	if togetherFirst {
		order[0], order[1] = order[1], order[0]
	}
	for _, f := range order {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	return alone, together, nil
}

// progRunBoth runs prog on both cpus at once, each on a thread pinned to it
// running iterations calls over its own frames, and returns the mean ns per
// call over both. The kernel's timer leaves out time a thread was
// preempted, but a CPU taken by other work shortens the overlap, which
// flatters the ratio.
func progRunBoth(prog *ebpf.Program, in [2][][]byte, cpus [2]int, iterations int, want uint32) (float64, error) {
	var wg sync.WaitGroup
	ns := make([]float64, 2)
	errs := make([]error, 2)
	for j, cpu := range cpus {
		wg.Go(func() { ns[j], errs[j] = progRunNs(prog, in[j], iterations, cpu, want) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return (ns[0] + ns[1]) / 2, nil
}
