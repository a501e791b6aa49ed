package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/prober"
)

// tableSize is the health table's size in every cell: the default,
// aggregation.table_size.
const tableSize = 65536

// FleetOptions configure `steadydns-bench fleet`: the fleet's roles over a
// real NATS server, measured per push.
type FleetOptions struct {
	Binary    string        // the steadydns binary the aggregators run; empty finds one (stats.ServerBinary)
	Push      time.Duration // aggregation.push_interval
	Pushes    int           // push periods per measured window
	Runs      int           // windows of the constancy cells; the report gives medians and ranges
	Checks    []int         // configured checks of the constancy cells
	Unhealthy []int         // percent of checks failing, of the constancy cells
	Checkers  int           // probers feeding each constancy cell
	// Capacity steps, each measured until the first that fails; none skips it.
	CheckerSteps []int // probers feeding one aggregator
	EdgeSteps    []int // edges one aggregator with its embedded NATS server serves
	ProberSteps  []int // checks one prober runs
	ProberPush   time.Duration
	Interval     time.Duration // the prober capacity's check interval: the default, 10 s
	Prefix       string        // testenv prefix of the prober capacity's hosts
	AggCPU       int           // the aggregators' CPU; the harness, its NATS server, probers and edges run on the other
	Log          io.Writer     `json:"-"`
}

// FleetDefaults are the options of `steadydns-bench fleet`.
func FleetDefaults() FleetOptions {
	return FleetOptions{
		// 14 runs: twice the constancy cells, so each takes every slot
		// twice, and enough for a 95% interval of each factor's median
		// narrower than their range (medianCI).
		Push: time.Second, Pushes: 30, Runs: 14,
		Checks: []int{10, tableSize - 1}, Unhealthy: []int{0, 50, 100}, Checkers: 3,
		CheckerSteps: []int{1, 10, 20, 40, 50, 60, 80, 120, 160},
		EdgeSteps:    []int{10, 20, 30, 40, 50, 100, 200, 400},
		ProberSteps:  []int{10_000, 15_000, 20_000, 25_000, 50_000, 100_000},
		Interval:     10 * time.Second, ProberPush: time.Second,
		Prefix: "sdf", AggCPU: 1,
	}
}

// FleetQuick are the options of `steadydns-bench fleet --quick` and of the
// tests: the constancy cells for a few pushes, no capacities.
func FleetQuick() FleetOptions {
	o := FleetDefaults()
	o.Push = 250 * time.Millisecond
	o.Pushes, o.Runs = 8, 1
	o.Unhealthy = []int{0, 100}
	o.Checkers = 1
	o.CheckerSteps, o.EdgeSteps, o.ProberSteps = nil, nil, nil
	return o
}

// FleetResults are everything `steadydns-bench fleet` measured.
type FleetResults struct {
	Machine  stats.Machine
	Options  FleetOptions
	Started  time.Time
	Cells    []FleetCell
	Effects  []Effect      // each number of checks and each share failing against the first, what the check reads
	Spread   float64       // the dearest cell's median CPU per push over the cheapest's, minus one, in percent
	CPU      stats.Summary // per run: the dearest cell's CPU per push over the cheapest's, minus one, in percent
	Bytes    stats.Summary // per run: the same for the bytes per push, all links together
	Groups   []FleetGroup
	Checks   []Check
	Checkers []Step // aggregator capacity: probers feeding it
	Edges    []Step // aggregator capacity: edges it serves
	Prober   []ProberStep
	Commands []string
}

// FleetCell is one constancy cell: configured checks, share failing.
type FleetCell struct {
	Checks, Unhealthy int
	// Again marks the reference cell's repeat: the same checks and failures
	// in processes of its own, whose ratio to the reference is what the
	// method gives two cells of the same work.
	Again bool
	CPUMs stats.Summary // the aggregator process's CPU per push, ms
	// Ratio is, per run, the cell's CPU per push over the reference's in
	// the same window: the mean of the first cell and its repeat; the
	// repeat's, over the first cell's. RatioCI is a 95% confidence interval
	// of its median (medianCI).
	Ratio      stats.Summary
	RatioCI    [2]float64
	Bytes      map[string]float64 // per link per push, from the last run
	FrameBytes int
	TableBytes int
	Down       int // entries down in the edge's last table
}

// Check is one pass/fail condition of a run.
type Check struct {
	What   string
	Pass   bool
	Detail string
}

// Step is one capacity step.
type Step struct {
	N        int // probers or edges
	CPUShare float64
	CPUMs    float64 // per push
	Frames   float64 // per prober per push, as the aggregator delivered them
	Tables   float64 // complete tables per edge per push, the least of the edges
	PushMs   float64 // the aggregator's last push time, ms
	Bytes    map[string]float64
	Pass     bool
	Why      string // what failed
}

// maxShare is the most of its CPU an aggregator may use and still count as
// keeping up: the push period's work done in half the period, the other
// half margin for bursts, garbage collection and the machine's noise.
const maxShare = 0.5

// RunFleet measures the fleet's roles over NATS: per-push constancy,
// then each capacity.
func RunFleet(ctx context.Context, o FleetOptions) (res *FleetResults, err error) {
	if o.Pushes < 2 || o.Runs < 1 || o.Push <= 0 || len(o.Checks) == 0 || len(o.Unhealthy) == 0 || o.Checkers < 1 {
		return nil, errors.New("fleet: want at least 2 pushes, 1 run, a push interval, checks, unhealthy shares and a checker")
	}
	for _, n := range o.Checks {
		if n < 1 || n >= tableSize {
			return nil, fmt.Errorf("fleet: %d checks: a table of %d entries holds 1 to %d", n, tableSize, tableSize-1)
		}
	}
	for _, u := range o.Unhealthy {
		if u < 0 || u > 100 {
			return nil, fmt.Errorf("fleet: %d%% unhealthy: want 0 to 100", u)
		}
	}
	if o.Binary == "" {
		if o.Binary, err = stats.ServerBinary(); err != nil {
			return nil, fmt.Errorf("finding the steadydns binary: %w", err)
		}
	} else if _, err := exec.LookPath(o.Binary); err != nil {
		return nil, fmt.Errorf("checking the steadydns binary: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("running as uid %d: the fleet benchmark builds network namespaces and pins threads, so it needs root", os.Geteuid())
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// The harness's side (its NATS server, probers and edges) stays off
	// the aggregators' CPU; threads started later inherit the mask.
	restore, err := pinProcess(1 - o.AggCPU)
	if err != nil {
		return nil, err
	}
	defer restore()
	res = &FleetResults{Machine: stats.ThisMachine(), Options: o, Started: time.Now().UTC()}
	dir, err := os.MkdirTemp("", "steadydns-fleet-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	keys, err := newFleetKeys(dir)
	if err != nil {
		return nil, err
	}
	if err := res.constancy(ctx, &o, keys, dir); err != nil {
		return nil, err
	}
	if res.Checkers, err = steps(ctx, &o, keys, dir, o.CheckerSteps, "checkers", func(n int) cellSpec {
		return cellSpec{name: fmt.Sprintf("checkers-%d", n), checks: 1000, checkers: n, edges: 1}
	}); err != nil {
		return nil, err
	}
	// The simulated edges, each reassembling and checking every table,
	// are the harness's heaviest work and not what is measured: they get
	// both CPUs, and the aggregator's own share still decides.
	restore()
	if res.Edges, err = steps(ctx, &o, keys, dir, o.EdgeSteps, "edges", func(n int) cellSpec {
		return cellSpec{name: fmt.Sprintf("edges-%d", n), checks: 1000, checkers: 1, edges: n, embed: true}
	}); err != nil {
		return nil, err
	}
	// A prober host has its CPUs to itself: the prober capacity runs on
	// both, with its backends and NATS server in this process.
	if res.Prober, err = proberCapacity(ctx, &o, dir); err != nil {
		return nil, err
	}
	return res, nil
}

// constancy runs every cell at once, each its own fleet with its own NATS
// server, so the machine's drift and its neighbours fall on all of them
// alike, and compares their CPU and bytes per push. The cells' probers
// publish in turns within every period, each cell in its own slot of the
// period's first half: ingesting a period's frames is nearly all of an
// aggregator's work, and with every cell's frames at the same instant the
// aggregators would time-slice the one CPU, and which ran first (whose
// caches were cold, who waited) would move their figures by as much as
// the effect under test. The slots rotate by one cell every run, and a run opens a period
// after its slots change, so no cell keeps the slot a neighbour's periodic
// work or the others' pushes fall on. Every run after the first starts new
// aggregator processes (cell.restart).
//
// Each cell is read against the reference (the fewest checks, the
// smallest share failing: the first cell and a repeat of it, the same work
// in processes of its own, averaged) in the same window, run by run, and
// the check reads each factor apart (effects): every number of checks
// against the fewest, every share failing against the smallest, the
// other factor held, the median over the runs. Aggregator processes of
// the same work differ by a few percent a push (where their memory
// landed), and a new process each run turns that into noise the median
// averages; the extremes of every cell's median, the spread the report
// also gives, grow with the number of cells and do not. The repeat read
// against the first shows the method's own noise.
func (res *FleetResults) constancy(ctx context.Context, o *FleetOptions, keys *fleetKeys, dir string) error {
	var cells []*cell
	defer func() {
		for _, c := range cells {
			c.close()
		}
	}()
	specs := make([]cellSpec, 0, len(o.Checks)*len(o.Unhealthy)+1)
	for _, checks := range o.Checks {
		for _, u := range o.Unhealthy {
			specs = append(specs, cellSpec{name: fmt.Sprintf("const-%d-%d", checks, u), checks: checks, unhealthy: u,
				checkers: o.Checkers, edges: 1})
		}
	}
	repeat := specs[0]
	repeat.name += "-again"
	specs = append(specs, repeat)
	n := len(specs)
	slot := o.Push / time.Duration(2*n)
	for i, spec := range specs {
		fmt.Fprintf(o.Log, "fleet: starting cell %s\n", spec.name)
		c, err := startCell(ctx, o, keys, dir, spec)
		if err != nil {
			return err
		}
		cells = append(cells, c)
		res.Cells = append(res.Cells, FleetCell{Checks: spec.checks, Unhealthy: spec.unhealthy, Again: i == n-1})
		if len(res.Commands) == 0 {
			res.Commands = append(res.Commands, c.cmd)
		}
	}
	var runs [][]float64 // every run's CPU per push, ms, cell by cell
	var cpuSpread, byteSpread []float64
	for run := range o.Runs {
		fmt.Fprintf(o.Log, "fleet: constancy run %d of %d, %d pushes\n", run+1, o.Runs, o.Pushes)
		since := make([]uint64, len(cells))
		for i, c := range cells {
			// Half a slot in, so that no cell publishes on the period's
			// boundary, where timers of whole seconds fire.
			c.offset.Store(int64(time.Duration((i+run)%n)*slot + slot/2))
			if run > 0 {
				var err error
				if since[i], err = c.restart(); err != nil {
					return err
				}
			}
		}
		// All restarted at once, so that none is older than another.
		for i, c := range cells {
			if run > 0 {
				if err := c.waitTables(ctx, since[i]); err != nil {
					return err
				}
			}
		}
		// The new processes' start (loading the config, its garbage
		// collected) stays out of the window.
		if err := quarter(ctx, o.Push, settlePushes); err != nil {
			return err
		}
		before := make([]snapshot, len(cells))
		for i, c := range cells {
			s, err := c.snapshot(false)
			if err != nil {
				return err
			}
			before[i] = s
		}
		if err := quarter(ctx, o.Push, o.Pushes-1); err != nil {
			return err
		}
		ms := make([]float64, len(cells))
		total := make([]float64, len(cells))
		for i, c := range cells {
			if err := c.failed(); err != nil {
				return err
			}
			after, err := c.snapshot(false)
			if err != nil {
				return err
			}
			w, err := diff(before[i], after, c.spec)
			if err != nil {
				return fmt.Errorf("cell %s: %w", c.spec.name, err)
			}
			ms[i] = float64(w.CPUPerPush) / float64(time.Millisecond)
			for _, v := range w.BytesPush {
				total[i] += v
			}
			_, down, tbytes := c.edges[0].state()
			res.Cells[i].Bytes, res.Cells[i].Down, res.Cells[i].TableBytes = w.BytesPush, down, tbytes
			res.Cells[i].FrameBytes = prober.FrameSize(c.cfg.FrameEntries())
		}
		fmt.Fprintf(o.Log, "fleet: ms/push %.2f\n", ms)
		runs = append(runs, ms)
		cpuSpread = append(cpuSpread, spread(ms))
		byteSpread = append(byteSpread, spread(total))
	}
	medians := make([]float64, len(cells))
	for i := range cells {
		// The reference's two processes, averaged, are what every cell
		// is read against, so one process's luck moves no comparison by
		// all of itself; the repeat is read against the first, the
		// difference between two processes of the same work.
		cpu, ratio := make([]float64, len(runs)), make([]float64, len(runs))
		for r, ms := range runs {
			repeat := len(ms) - 1
			cpu[r], ratio[r] = ms[i], ms[i]/((ms[0]+ms[repeat])/2)
			if i == repeat {
				ratio[r] = ms[repeat] / ms[0]
			}
		}
		c := &res.Cells[i]
		c.CPUMs, c.Ratio = stats.Summarize(cpu), stats.Summarize(ratio)
		c.RatioCI[0], c.RatioCI[1] = stats.MedianCI(ratio)
		medians[i] = c.CPUMs.Median
	}
	res.Spread = spread(medians)
	res.CPU, res.Bytes = stats.Summarize(cpuSpread), stats.Summarize(byteSpread)
	res.Groups = groups(res.Cells)
	var err error
	if res.Effects, err = effects(o.Checks, o.Unhealthy, runs); err != nil {
		return err
	}
	res.Checks = append(res.Checks, res.cpuCheck(), Check{What: "bytes on the wire per push within 5% across checks and failures",
		Pass: res.Bytes.Max <= 5, Detail: fmt.Sprintf("largest spread in a run %.2f%%", res.Bytes.Max)})
	return nil
}

// cpuCheck passes when every effect's median lies within 5% of 1: a push
// costs the same, within 5%, from the fewest checks to the most and from
// the smallest share failing to the largest.
func (res *FleetResults) cpuCheck() Check {
	chk := Check{What: "aggregator CPU per push within 5% from the fewest checks to the most and from the smallest share failing to the largest (median of the runs' ratios)", Pass: true}
	var parts []string
	for _, e := range res.Effects {
		chk.Pass = chk.Pass && math.Abs(e.Ratio.Median-1) <= 0.05
		parts = append(parts, fmt.Sprintf("%s over %s %s", e.level(), e.first(), rise(e.Ratio.Median, e.CI)))
	}
	repeat := res.Cells[len(res.Cells)-1]
	parts = append(parts, fmt.Sprintf("the first cell's repeat over it %s; the cells' medians within %.1f%% (per run: median %.1f%%, %.1f–%.1f%%)",
		rise(repeat.Ratio.Median, repeat.RatioCI), res.Spread, res.CPU.Median, res.CPU.Min, res.CPU.Max))
	chk.Detail = strings.Join(parts, "; ")
	return chk
}

// settlePushes are the push periods between the constancy cells'
// aggregators' first tables and a window: a few garbage collections, so the
// heap's goal no longer counts the config's loading.
const settlePushes = 20

// FleetGroup is the constancy cells of one number of checks.
type FleetGroup struct {
	Checks int
	Median float64 // ms per push: the median of the cells' medians
	// Spread is the dearest cell's median over the cheapest's, minus one,
	// in percent. At 10 checks the shares failing are 0, 5 or 10 entries
	// of the same work, so it is the measurement's own noise.
	Spread float64
}

// groups gathers the cells by their number of checks, in the cells' order.
func groups(cells []FleetCell) []FleetGroup {
	var out []FleetGroup
	for _, c := range cells {
		if c.Again || len(out) > 0 && out[len(out)-1].Checks == c.Checks {
			continue
		}
		var ms []float64
		for _, d := range cells {
			if d.Checks == c.Checks && !d.Again {
				ms = append(ms, d.CPUMs.Median)
			}
		}
		out = append(out, FleetGroup{Checks: c.Checks, Median: stats.Summarize(ms).Median, Spread: spread(ms)})
	}
	return out
}

// spread is the largest over the smallest, minus one, in percent.
func spread(xs []float64) float64 {
	s := stats.Summarize(xs)
	return 100 * (s.Max/s.Min - 1)
}

// steps measures one capacity: a cell per step, in order, until the
// first that does not keep up.
func steps(ctx context.Context, o *FleetOptions, keys *fleetKeys, dir string, ns []int, what string, spec func(int) cellSpec) ([]Step, error) {
	var out []Step
	for _, n := range ns {
		fmt.Fprintf(o.Log, "fleet: capacity, %d %s\n", n, what)
		c, err := startCell(ctx, o, keys, dir, spec(n))
		if err != nil {
			return out, err
		}
		w, err := c.measure(ctx, o.Pushes)
		c.close()
		if err != nil {
			return out, fmt.Errorf("%d %s: %w", n, what, err)
		}
		s := Step{N: n, CPUShare: w.CPUShare, CPUMs: float64(w.CPUPerPush) / float64(time.Millisecond),
			Frames: w.Frames, Tables: w.Tables, PushMs: 1000 * w.PushSeconds, Bytes: w.BytesPush, Pass: true}
		// One period of slack at the window's edges: a frame or table
		// that a loaded machine delays past the window's end counts in
		// the next one.
		enough := 1 - 1/float64(w.Pushes) - 0.01
		switch {
		case w.CPUShare > maxShare:
			s.Pass, s.Why = false, fmt.Sprintf("the aggregator used %.0f%% of its CPU", 100*w.CPUShare)
		case w.Frames < enough:
			s.Pass, s.Why = false, fmt.Sprintf("%.1f%% of the frames delivered", 100*w.Frames)
		case w.Tables < enough:
			s.Pass, s.Why = false, fmt.Sprintf("an edge got %.1f%% of the tables", 100*w.Tables)
		}
		out = append(out, s)
		fmt.Fprintf(o.Log, "fleet: %d %s: cpu %.0f%%, %.2f ms/push, frames %.3f, tables %.3f, pass %v %s\n",
			n, what, 100*s.CPUShare, s.CPUMs, s.Frames, s.Tables, s.Pass, s.Why)
		if !s.Pass {
			break
		}
	}
	return out, nil
}

// pinProcess puts every thread of this process on cpu and returns what
// puts them back.
func pinProcess(cpu int) (func(), error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("reading cpu affinity: %w", err)
	}
	set.Set(cpu)
	apply := func(s *unix.CPUSet) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("listing threads: %w", err)
		}
		for _, t := range tasks {
			var tid int
			fmt.Sscan(t.Name(), &tid)
			if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pinning thread %d to cpu %d: %w", tid, cpu, err)
			}
		}
		return nil
	}
	if err := apply(&set); err != nil {
		return nil, err
	}
	return func() { apply(&old) }, nil
}
