package dnsbench

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/bench/xdpprog"
	"github.com/steadydns/steadydns/loader"
)

// BreakdownResult is one size's and K's program against the bare
// reflector, against the table read (bench/xdpprog/tableread.c: the
// reflector plus the one read of the record table any answer from it
// needs) and by stage. The table read reads the program's own table, so
// what it adds to the reflector is what the memory charges for a table of
// this size; what the program adds to the table read is its own work.
type BreakdownResult struct {
	Names, K                                                   int
	ProgramNs, TableReadNs, ReflectorNs                        stats.Summary // ns per packet under load, one figure per round's slice
	OverReflector, TableReadOverReflector                      stats.Summary // ratios per pair of rounds
	OverTableRead                                              stats.Summary
	OverReflectorCI, TableReadOverReflectorCI, OverTableReadCI [2]float64 // 95% confidence intervals of the ratios' medians
	// Stages is the program by stage, in its order: parse, hash, lookup,
	// select, grow, and write, the whole program.
	Stages []StageResult
}

// StageResult is one stage of the program, measured in the table read's
// run: the program cut after the stage (a stage build, bench/xdpprog), which
// returns the query as the reflector does once the stage is done.
type StageResult struct {
	Name string
	Ns   stats.Summary // the cut program's ns per packet under load, one figure per round's slice; the whole program's for write
	// Adds is the stage's own cost: ns per packet over the cut after the
	// stage before it (the reflector, for parse), one figure per pair of
	// rounds, and AddsCI a 95% confidence interval of its median. Write's
	// is the reply's writing less the reflector's turning the query
	// round, which the cut programs do instead.
	Adds   stats.Summary
	AddsCI [2]float64
}

// The cells of the table read's paired slices, in the order of progs: the
// program first, so that the generator's first queries find it on the
// link and are answered; then the table read, the stage builds in the
// program's order (stageBuilds) and the reflector.
const (
	cellProgram = iota
	cellTableRead
	cellParse
	cellHash
	cellLookup
	cellSelect
	cellGrow
	cellReflector
	breakdownCells
)

// stageBuilds are the stage builds, cells cellParse to cellGrow.
var stageBuilds = []struct {
	name string
	spec func() (*ebpf.CollectionSpec, error)
}{
	{"parse", xdpprog.LoadStageParse},
	{"hash", xdpprog.LoadStageHash},
	{"lookup", xdpprog.LoadStageLookup},
	{"select", xdpprog.LoadStageSelect},
	{"grow", xdpprog.LoadStageGrow},
}

// breakdownPrograms loads, once per pair of rounds, this build's program onto
// o's maps, the table read onto o's record table, the stage builds onto
// o's maps and the reflector, in turn, each pair starting with another of
// them. Like rrlPrograms, every pair has loads of its own.
func breakdownPrograms(o *loader.Objects, opts loader.Options, pairs int) (progs [][]*ebpf.Program, err error) {
	progs = make([][]*ebpf.Program, breakdownCells)
	for pair := range pairs {
		for j := range breakdownCells {
			i := (pair + j) % breakdownCells
			var p *ebpf.Program
			switch i {
			case cellProgram:
				p, err = o.LoadProgram(opts)
			case cellTableRead:
				p, err = loadTableRead(o)
			case cellReflector:
				// The reflector's objects are its program alone:
				// closePrograms closing p closes all of them.
				p, _, err = loadReflector()
			default:
				p, err = loadStage(o, opts, i-cellParse)
			}
			if err != nil {
				return progs, fmt.Errorf("loading the table read's cells: %w", err)
			}
			progs[i] = append(progs[i], p)
		}
	}
	return progs, nil
}

// loadTableRead loads the table read onto o's record table, its live size,
// its ext entries and its pools: the same maps the program reads.
func loadTableRead(o *loader.Objects) (*ebpf.Program, error) {
	spec, err := xdpprog.LoadTableRead()
	if err != nil {
		return nil, fmt.Errorf("reading the table read: %w", err)
	}
	maps := map[string]*ebpf.Map{"records": o.Records, "rec_size": o.RecSize, "rec_exts": o.RecExts, "rec_pools": o.RecPools}
	for name, m := range maps {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("the table read has no map %s", name)
		}
		ms.MaxEntries = m.MaxEntries()
	}
	var objs xdpprog.TableReadPrograms
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: maps}); err != nil {
		return nil, fmt.Errorf("loading the table read: %w", err)
	}
	return objs.TableRead, nil
}

// loadStage loads stage build i (stageBuilds) onto o's maps.
func loadStage(o *loader.Objects, opts loader.Options, i int) (*ebpf.Program, error) {
	st := stageBuilds[i]
	spec, err := st.spec()
	if err != nil {
		return nil, fmt.Errorf("reading the program cut after %s: %w", st.name, err)
	}
	p, err := o.LoadProgramSpec(opts, spec)
	if err != nil {
		return nil, fmt.Errorf("loading the program cut after %s: %w", st.name, err)
	}
	return p, nil
}

// measureBreakdown measures the program, the table read, the stage builds
// and the reflector under load with every candidate up, asking every name's
// A: they take turns on the link within one generator run, in slices, as
// rate limiting's cells do (rrlRun), and each ratio and each stage's cost
// is read within a pair of rounds.
func (r *rig) measureBreakdown(ctx context.Context, w *ConstantWork, o *loader.Objects, progs [][]*ebpf.Program, queries string, n, k int) (err error) {
	if err := writeLevel(o, 0); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.reattach(o)) }()
	fmt.Fprintf(r.o.Log, "bench: the table read, %d names, K=%d: %d rounds of %v slices\n", n, k, r.o.RRLRounds, r.o.RRLSlice)
	var got []rrlSlices
	other, err := r.quietly(func() (err error) {
		cells := make([]int, breakdownCells)
		for i := range cells {
			cells[i] = i
		}
		got, err = r.rrlRun(ctx, o, progs, cells, queries)
		return errors.Join(err, r.clientPass(false))
	})
	if err != nil {
		return fmt.Errorf("the table read, %d names, K=%d: %w", n, k, err)
	}
	w.OtherLoad = max(w.OtherLoad, other)
	prog, tread, refl := got[cellProgram].ns, got[cellTableRead].ns, got[cellReflector].ns
	res := BreakdownResult{Names: n, K: k, ProgramNs: stats.Summarize(prog), TableReadNs: stats.Summarize(tread), ReflectorNs: stats.Summarize(refl)}
	for _, c := range []struct {
		x, ref []float64
		s      *stats.Summary
		ci     *[2]float64
	}{{prog, refl, &res.OverReflector, &res.OverReflectorCI}, {tread, refl, &res.TableReadOverReflector, &res.TableReadOverReflectorCI}, {prog, tread, &res.OverTableRead, &res.OverTableReadCI}} {
		ratios := pairRatios(c.x, c.ref)
		*c.s = stats.Summarize(ratios)
		c.ci[0], c.ci[1] = stats.MedianCI(ratios)
	}
	stage := func(name string, ns, before []float64) {
		adds := pairDiffs(ns, before)
		st := StageResult{Name: name, Ns: stats.Summarize(ns), Adds: stats.Summarize(adds)}
		st.AddsCI[0], st.AddsCI[1] = stats.MedianCI(adds)
		res.Stages = append(res.Stages, st)
	}
	before := refl
	for i, st := range stageBuilds {
		ns := got[cellParse+i].ns
		stage(st.name, ns, before)
		before = ns
	}
	stage("write", prog, before)
	w.Breakdown = append(w.Breakdown, res)
	return nil
}
