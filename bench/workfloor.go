package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bpf"
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
}

// The cells of the floor's paired slices, in the order of progs: the
// program first, so that the generator's first queries find it on the
// link and are answered.
const (
	floorProgram = iota
	floorFloor
	floorReflector
	floorCells
)

// floorPrograms loads, once per pair of rounds, this build's program onto
// o's maps, the table floor onto o's record table and the reflector, in
// turn, each pair starting with another of them. Like rrlPrograms, every
// pair has loads of its own.
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
			default:
				// The reflector's objects are its program alone:
				// closePrograms closing p closes all of them.
				p, _, err = loadReflector()
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
	spec, err := bpf.LoadFloor()
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
	var objs bpf.FloorPrograms
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: maps}); err != nil {
		return nil, fmt.Errorf("loading the table floor: %w", err)
	}
	return objs.TableFloor, nil
}

// workFloor measures the program, the table floor and the reflector under
// load with every candidate up, asking every name's A: the three take
// turns on the link within one generator run, in slices, as rate
// limiting's cells do (rrlRun), and each ratio is read within a pair of
// rounds.
func (r *rig) workFloor(ctx context.Context, w *Work, o *loader.Objects, progs [][]*ebpf.Program, queries string, n, k int) (err error) {
	if err := writeWorkHealth(o, 0); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.attachWork(o)) }()
	fmt.Fprintf(r.o.Log, "bench: the table floor, %d names, K=%d: %d rounds of %v slices\n", n, k, r.o.RRLRounds, r.o.RRLSlice)
	var got []rrlSlices
	other, err := r.quietly(func() (err error) {
		got, err = r.rrlRun(ctx, o, progs, []int{floorProgram, floorFloor, floorReflector}, queries)
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
	w.Floor = append(w.Floor, res)
	return nil
}
