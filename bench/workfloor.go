package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bench/xdpprog"
	"github.com/steadydns/steadydns/loader"
)

// FloorResult is one size's and K's program against the bare reflector
// and against the table floor (bpf/floor.c): the reflector plus the one
// read of the record table any answer from it needs. The floor reads the
// program's own table, so what it adds to the reflector is what the
// memory charges for a table of this size here; what the program adds to
// the floor is its own work.
type FloorResult struct {
	Names, K                                           int
	ProgramNs, FloorNs, ReflectorNs                    Summary // ns per packet under load, one figure per round's slice
	OverReflector, FloorOverReflector                  Summary // ratios per pair of rounds
	OverFloor                                          Summary
	OverReflectorCI, FloorOverReflectorCI, OverFloorCI [2]float64 // 95% confidence intervals of the ratios' medians
	// Stages is the program by stage, in its order: parse, hash, lookup,
	// select, grow, and write, the whole program.
	Stages []StageResult
}

// StageResult is one stage of the program, measured in the table floor's
// run: the program cut after the stage (a stage build, bpf/gen.go), which
// returns the query as the reflector does once the stage is done.
type StageResult struct {
	Name string
	Ns   Summary // the cut program's ns per packet under load, one figure per round's slice; the whole program's for write
	// Adds is the stage's own cost: ns per packet over the cut after the
	// stage before it (the reflector, for parse), one figure per pair of
	// rounds, and AddsCI a 95% confidence interval of its median. Write's
	// is the reply's writing less the reflector's turning the query
	// round, which the cut programs do instead.
	Adds   Summary
	AddsCI [2]float64
}

// The cells of the floor's paired slices, in the order of progs: the
// program first, so that the generator's first queries find it on the
// link and are answered; then the floor, the stage builds in the
// program's order (floorStages) and the reflector.
const (
	floorProgram = iota
	floorFloor
	floorParse
	floorHash
	floorLookup
	floorSelect
	floorGrow
	floorReflector
	floorCells
)

// floorStages are the stage builds, cells floorParse to floorGrow.
var floorStages = []struct {
	name string
	spec func() (*ebpf.CollectionSpec, error)
}{
	{"parse", xdpprog.LoadStageParse},
	{"hash", xdpprog.LoadStageHash},
	{"lookup", xdpprog.LoadStageLookup},
	{"select", xdpprog.LoadStageSelect},
	{"grow", xdpprog.LoadStageGrow},
}

// floorPrograms loads, once per pair of rounds, this build's program onto
// o's maps, the table floor onto o's record table, the stage builds onto
// o's maps and the reflector, in turn, each pair starting with another of
// them. Like rrlPrograms, every pair has loads of its own.
func floorPrograms(o *loader.Objects, opts loader.Options, pairs int) (progs [][]*ebpf.Program, err error) {
	progs = make([][]*ebpf.Program, floorCells)
	for pair := range pairs {
		for j := range floorCells {
			i := (pair + j) % floorCells
			var p *ebpf.Program
			switch i {
			case floorProgram:
				p, err = o.LoadProgram(opts)
			case floorFloor:
				p, err = loadFloor(o)
			case floorReflector:
				// The reflector's objects are its program alone:
				// closePrograms closing p closes all of them.
				p, _, err = loadReflector()
			default:
				p, err = loadStage(o, opts, i-floorParse)
			}
			if err != nil {
				return progs, fmt.Errorf("loading the table floor's cells: %w", err)
			}
			progs[i] = append(progs[i], p)
		}
	}
	return progs, nil
}

// loadFloor loads the table floor onto o's record table, its live size
// and its hot index: the same maps the program reads.
func loadFloor(o *loader.Objects) (*ebpf.Program, error) {
	spec, err := xdpprog.LoadTableRead()
	if err != nil {
		return nil, fmt.Errorf("reading the table floor: %w", err)
	}
	maps := map[string]*ebpf.Map{"records": o.Records, "rec_tags": o.RecTags, "rec_bits": o.RecBits}
	for name, m := range maps {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("the table floor has no map %s", name)
		}
		ms.MaxEntries = m.MaxEntries()
	}
	var objs xdpprog.TableReadPrograms
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: maps}); err != nil {
		return nil, fmt.Errorf("loading the table floor: %w", err)
	}
	return objs.TableRead, nil
}

// loadStage loads stage build i (floorStages) onto o's maps.
func loadStage(o *loader.Objects, opts loader.Options, i int) (*ebpf.Program, error) {
	st := floorStages[i]
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

// workFloor measures the program, the table floor, the stage builds and
// the reflector under load with every candidate up, asking every name's
// A: they take turns on the link within one generator run, in slices, as
// rate limiting's cells do (rrlRun), and each ratio and each stage's cost
// is read within a pair of rounds.
func (r *rig) workFloor(ctx context.Context, w *Work, o *loader.Objects, progs [][]*ebpf.Program, queries string, n, k int) (err error) {
	if err := writeWorkHealth(o, 0); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.attachWork(o)) }()
	fmt.Fprintf(r.o.Log, "bench: the table floor, %d names, K=%d: %d rounds of %v slices\n", n, k, r.o.RRLRounds, r.o.RRLSlice)
	var got []rrlSlices
	other, err := r.quietly(func() (err error) {
		cells := make([]int, floorCells)
		for i := range cells {
			cells[i] = i
		}
		got, err = r.rrlRun(ctx, o, progs, cells, queries)
		return errors.Join(err, r.clientPass(false))
	})
	if err != nil {
		return fmt.Errorf("the table floor, %d names, K=%d: %w", n, k, err)
	}
	w.OtherLoad = max(w.OtherLoad, other)
	prog, floor, refl := got[floorProgram].ns, got[floorFloor].ns, got[floorReflector].ns
	res := FloorResult{Names: n, K: k, ProgramNs: summarize(prog), FloorNs: summarize(floor), ReflectorNs: summarize(refl)}
	for _, c := range []struct {
		x, ref []float64
		s      *Summary
		ci     *[2]float64
	}{{prog, refl, &res.OverReflector, &res.OverReflectorCI}, {floor, refl, &res.FloorOverReflector, &res.FloorOverReflectorCI}, {prog, floor, &res.OverFloor, &res.OverFloorCI}} {
		ratios := pairRatios(c.x, c.ref)
		*c.s = summarize(ratios)
		c.ci[0], c.ci[1] = medianCI(ratios)
	}
	stage := func(name string, ns, before []float64) {
		adds := pairDiffs(ns, before)
		st := StageResult{Name: name, Ns: summarize(ns), Adds: summarize(adds)}
		st.AddsCI[0], st.AddsCI[1] = medianCI(adds)
		res.Stages = append(res.Stages, st)
	}
	before := refl
	for i, st := range floorStages {
		ns := got[floorParse+i].ns
		stage(st.name, ns, before)
		before = ns
	}
	stage("write", prog, before)
	w.Floor = append(w.Floor, res)
	return nil
}
