package dnsbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/bench/xdpprog"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/loader"
)

// ConstantWork is the constant-work measurement: what a query costs the
// XDP program with 0%, 50% and 100% of its candidates down.
type ConstantWork struct {
	Cells       []ConstantWorkResult
	Warmup      []WarmupResult    // the runs before each size's and K's cells, until the cost per packet settled
	PassNs      stats.Summary     // BPF_PROG_RUN of an XDP_PASS program: the harness's overhead, subtracted from RunNs
	ReflectorNs stats.Summary     // BPF_PROG_RUN of the reflector, overhead subtracted, for scale
	Levels      []LevelResult     // the health levels again, in paired slices of one generator run
	Variants    []VariantResult   // AAAA and EDNS queries, all candidates up
	RRL         []RRLResult       // response rate limiting off, on, and over the limit, all candidates up
	Compare     []CompareResult   // this build's program against Options.CompareObject's, at Options.CompareDown
	Breakdown   []BreakdownResult // the program against the reflector and the table read, all candidates up
	Skew        []SkewResult      // the program against the reflector, uniform and Zipf query mixes
	Cores       []CoresResult     // the program on two CPUs at once against one, through BPF_PROG_RUN
	Memory      []MemoryResult    // the record table's kernel memory per set, as bpftool shows it
	Skipped     []string          // sizes that did not run here, and why
	OtherLoad   float64           // the largest share of the CPUs other processes took during a round that was kept
}

// ConstantWorkResult is one cell: a zone size, K candidates per name, a
// share down.
type ConstantWorkResult struct {
	Names, K, DownPct int
	Answers           int           // answers per reply, checked on every sampled frame
	RunNs             stats.Summary // BPF_PROG_RUN ns per query, overhead subtracted
	LoadNs            stats.Summary // in-kernel ns per packet under kxdpgun
	Answered          stats.Summary // replies per second under kxdpgun
}

// MemoryResult is the kernel memory of the record table and the maps of
// the sets it cannot hold, with a zone size's sets in it: the maps'
// memlock, which bpftool map show prints, whatever of them is in use.
type MemoryResult struct {
	Names, K, Sets int
	Records        uint64 // bytes of the records map
	Ext            uint64 // of rec_exts and rec_pools
	PerSet         float64
	Spilled        int // sets past PROBE_MAX of their home, answered by the fallback
}

// VariantResult is one query shape other than a plain A query, at 0% down:
// what AAAA answers and an EDNS OPT record add.
type VariantResult struct {
	Names, K int
	Qtype    string // A or AAAA
	EDNS     bool   // the query has an OPT record, which the reply echoes
	Answers  int
	LoadNs   stats.Summary // in-kernel ns per packet under kxdpgun
	Answered stats.Summary // replies per second under kxdpgun
}

// variants are the shapes measured besides a plain A query.
var variants = []struct {
	qtype string
	edns  bool
}{{"A", true}, {"AAAA", false}, {"AAAA", true}}

// The measurement's shape: the health table's and the record maps'
// default sizes, and the frames BPF_PROG_RUN cycles through.
const (
	healthTableSize = 65536
	recordTableSize = 65536
	progRunFrames   = 4096
)

// healthLevels are the shares of candidates down, in percent, that every
// size and K is measured at.
var healthLevels = []int{0, 50, 100}

// constantWork loads the steadydns program with synthetic record sets
// whose candidates are health-checked, attaches it to the server's veth,
// and measures every cell through BPF_PROG_RUN and under load.
func (r *rig) constantWork(ctx context.Context) (w *ConstantWork, err error) {
	w = &ConstantWork{}
	fmt.Fprintf(r.o.Log, "bench: constant work\n")
	// Ascending, so each size adds names to the maps rather than leaving
	// stale ones from a bigger size behind.
	sizes := slices.Clone(r.o.ConstantWorkSizes)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	// Pools (K past a slot's candidates) get a pool map for every set of
	// the largest size; without them it stays at its smallest.
	pools := slices.Max(r.o.ConstantWorkK) > loader.MaxCandidates
	var poolCap uint32
	if pools {
		poolCap = loader.PoolsFor(2 * sizes[len(sizes)-1])
	}
	// So do sets of more candidates than a slot holds, for their ext
	// entries.
	exts := slices.Max(r.o.ConstantWorkK) > 1
	var extCap uint32
	if exts {
		extCap = loader.ExtsFor(2 * sizes[len(sizes)-1])
	}
	opts := loader.Options{
		BPFFS:          filepath.Join(r.bpffs, "work"),
		HealthCapacity: healthTableSize,
		// An A and an AAAA set per name of the largest size; never
		// less than a server's default, so that a quick run measures a
		// table of the size a server has.
		RecordCapacity: uint32(max(2*sizes[len(sizes)-1], recordTableSize)),
		PoolCapacity:   poolCap,
		ExtCapacity:    extCap,
		Servers:        []netip.Addr{r.env.Edge.V4, r.env.Edge.V6},
	}
	o, err := loader.Load(opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, o.Unpin(), o.Close()) }()
	fmt.Fprintf(r.o.Log, "bench: loading the rate-limiting cells' programs, %d of each\n", r.o.RRLRounds/2)
	progs, err := rrlPrograms(o, opts, r.o.RRLRounds/2)
	defer func() { err = errors.Join(err, closePrograms(progs)) }()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(r.o.Log, "bench: loading the table read's cells, %d of each\n", r.o.RRLRounds/2)
	breakdowns, err := breakdownPrograms(o, opts, r.o.RRLRounds/2)
	defer func() { err = errors.Join(err, closePrograms(breakdowns)) }()
	if err != nil {
		return nil, err
	}
	var cmp [][]*ebpf.Program
	if r.o.CompareObject != "" {
		fmt.Fprintf(r.o.Log, "bench: loading this build's program and %s's, %d of each\n", r.o.CompareObject, r.o.RRLRounds/2)
		cmp, err = comparePrograms(o, opts, r.o.CompareObject, r.o.RRLRounds/2)
		defer func() { err = errors.Join(err, closePrograms(cmp)) }()
		if err != nil {
			return nil, err
		}
	}
	if err := r.measureBaseline(w, o); err != nil {
		return nil, err
	}
	if err := r.env.Edge.Do(func() error { _, err := o.Attach(r.env.Edge.Link, loader.ModeNative); return err }); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, o.Detach(r.env.Edge.Link)) }()
	if err := r.pinNAPI(); err != nil {
		return nil, err
	}
	for _, n := range sizes {
		if why := fits(2*n, pools, exts); why != "" {
			w.Skipped = append(w.Skipped, why)
			fmt.Fprintf(r.o.Log, "bench: skipping %d names: %s\n", n, why)
			continue
		}
		if err := r.measureSize(ctx, w, o, progs, breakdowns, cmp, n); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// measureBaseline measures the fixed cost of the BPF_PROG_RUN loop with an
// XDP_PASS program, and the reflector for scale.
func (r *rig) measureBaseline(w *ConstantWork, o *loader.Objects) error {
	frames := [][]byte{r.queryFrame(r.env.Client.V4, 0)}
	var pass, refl []float64
	for range r.o.Runs {
		p, err := progRunNs(r.pass.XdpPass, frames, r.o.Iterations, r.o.ServerCPU, 2 /* XDP_PASS */)
		if err != nil {
			return err
		}
		pass = append(pass, p)
	}
	w.PassNs = stats.Summarize(pass)
	reflector, closeReflector, err := loadReflector()
	if err != nil {
		return err
	}
	defer closeReflector()
	for range r.o.Runs {
		ns, err := progRunNs(reflector, frames, r.o.Iterations, r.o.ServerCPU, xdpTX)
		if err != nil {
			return err
		}
		refl = append(refl, ns-w.PassNs.Median)
	}
	w.ReflectorNs = stats.Summarize(refl)
	return nil
}

// measureSize fills the maps with n names and, once their cost has
// settled, measures each K of Options.ConstantWorkK at every share down,
// the other query shapes, rate limiting's cells, the table read's, and
// this build's program against another build's where cmp holds them.
func (r *rig) measureSize(ctx context.Context, w *ConstantWork, o *loader.Objects, progs, breakdowns, cmp [][]*ebpf.Program, n int) error {
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	var asked []int
	for range min(n, progRunFrames) {
		asked = append(asked, rng.IntN(n))
	}
	queries := filepath.Join(r.dir, fmt.Sprintf("work-%d.txt", n))
	order := rng.Perm(n)
	err := writeLines(queries, func(b *bufio.Writer) {
		for _, i := range order {
			fmt.Fprintf(b, "%s A\n", nameOf(i))
		}
	})
	if err != nil {
		return err
	}
	for _, k := range r.o.ConstantWorkK {
		fmt.Fprintf(r.o.Log, "bench: constant work, %d names, K=%d\n", n, k)
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			if err := putRecordSets(o, n, k, qtype, r.o); err != nil {
				return err
			}
		}
		mem, err := r.measureMemory(n, k)
		if err != nil {
			return err
		}
		// A name spilled past PROBE_MAX is the fallback's: BPF_PROG_RUN
		// asks only names XDP answers.
		frames, err := r.placedFrames(o, asked, r.env.Client.V4)
		if err != nil {
			return err
		}
		w.Memory = append(w.Memory, mem)
		fmt.Fprintf(r.o.Log, "bench: %d names, K=%d: %.0f bytes per set, %d spilled\n", n, k, mem.PerSet, mem.Spilled)
		if err := r.warmUp(ctx, w, o, queries, n, k); err != nil {
			return err
		}
		if err := r.measureLevels(ctx, w, o, frames, queries, n, k); err != nil {
			return err
		}
		apart, err := r.placedFrames(o, asked, secondClient)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.o.Log, "bench: %d names, K=%d: two CPUs, %d pairs of rounds\n", n, k, r.o.RRLRounds/2)
		var cores []CoresResult
		other, err := r.quietly(func() (err error) {
			cores, err = r.measureCores(o, progs, frames, apart, n, k)
			return err
		})
		if err != nil {
			return err
		}
		w.OtherLoad = max(w.OtherLoad, other)
		w.Cores = append(w.Cores, cores...)
		if err := r.measureLevelSlices(ctx, w, o, queries, n, k); err != nil {
			return err
		}
		if err := r.measureVariants(ctx, w, o, order, n, k); err != nil {
			return err
		}
		if err := r.measureRRL(ctx, w, o, progs, queries, order[0], n, k); err != nil {
			return err
		}
		if err := r.measureBreakdown(ctx, w, o, breakdowns, queries, n, k); err != nil {
			return err
		}
		if err := r.measureSkew(ctx, w, o, breakdowns, queries, order, n, k); err != nil {
			return err
		}
		if cmp != nil {
			if err := r.measureCompare(ctx, w, o, cmp, order, n, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// measureVariants measures AAAA and EDNS queries under load with every
// candidate up, in rounds like the levels.
func (r *rig) measureVariants(ctx context.Context, w *ConstantWork, o *loader.Objects, order []int, n, k int) error {
	if err := writeLevel(o, 0); err != nil {
		return err
	}
	files := make([]string, len(variants))
	for i, v := range variants {
		flag := ""
		if v.edns {
			flag = " E"
		}
		files[i] = filepath.Join(r.dir, fmt.Sprintf("work-%d-%s%s.txt", n, v.qtype, strings.TrimSpace(flag)))
		err := writeLines(files[i], func(b *bufio.Writer) {
			for _, j := range order {
				fmt.Fprintf(b, "%s %s%s\n", nameOf(j), v.qtype, flag)
			}
		})
		if err != nil {
			return err
		}
	}
	samples := make([]sample, len(variants))
	for range r.o.Runs {
		for i := range variants {
			cost, answered, other, err := r.quietLoadRun(ctx, o.Steadydns, files[i])
			if err != nil {
				return err
			}
			w.OtherLoad = max(w.OtherLoad, other)
			samples[i].load, samples[i].answered = append(samples[i].load, cost), append(samples[i].answered, answered)
		}
	}
	for i, v := range variants {
		w.Variants = append(w.Variants, VariantResult{Names: n, K: k, Qtype: v.qtype, EDNS: v.edns, Answers: expectedAnswers(k, 0, r.o),
			LoadNs: stats.Summarize(samples[i].load), Answered: stats.Summarize(samples[i].answered)})
	}
	return nil
}

// sample is one round's figures for one cell.
type sample struct{ run, load, answered []float64 }

// interleaveChunks is how many slices each level's BPF_PROG_RUN calls
// are cut into, taking turns with the other levels.
const interleaveChunks = 20

// measureLevels measures the health levels of one size and K in rounds. In
// BPF_PROG_RUN the levels take turns in short slices, and under load each
// round runs every level once, so that a disturbance from outside falls on
// all levels alike rather than on whichever level ran at the time: a
// shared host has slow spells of a second and more.
func (r *rig) measureLevels(ctx context.Context, w *ConstantWork, o *loader.Objects, frames [][]byte, queries string, n, k int) error {
	for _, down := range healthLevels {
		if err := writeLevel(o, down); err != nil {
			return err
		}
		for j, f := range frames {
			if err := checkReply(o.Steadydns, f, expectedAnswers(k, down, r.o)); err != nil {
				return fmt.Errorf("constant work, %d names, K=%d, %d%% down, frame %d: %w", n, k, down, j, err)
			}
		}
	}
	samples := make([]sample, len(healthLevels))
	for range r.o.Runs {
		var runs []float64
		other, err := r.quietly(func() (err error) {
			runs, err = r.interleavedRun(o, frames)
			return err
		})
		if err != nil {
			return err
		}
		w.OtherLoad = max(w.OtherLoad, other)
		for i, down := range healthLevels {
			if err := writeLevel(o, down); err != nil {
				return err
			}
			cost, answered, other, err := r.quietLoadRun(ctx, o.Steadydns, queries)
			if err != nil {
				return err
			}
			w.OtherLoad = max(w.OtherLoad, other)
			s := &samples[i]
			s.run, s.load, s.answered = append(s.run, runs[i]-w.PassNs.Median), append(s.load, cost), append(s.answered, answered)
		}
	}
	for i, down := range healthLevels {
		w.Cells = append(w.Cells, ConstantWorkResult{
			Names: n, K: k, DownPct: down, Answers: expectedAnswers(k, down, r.o),
			RunNs: stats.Summarize(samples[i].run), LoadNs: stats.Summarize(samples[i].load), Answered: stats.Summarize(samples[i].answered),
		})
	}
	return nil
}

// interleavedRun times the program through BPF_PROG_RUN at every health
// level, the levels taking turns in interleaveChunks slices of the
// iterations, and returns the ns per query of each level.
func (r *rig) interleavedRun(o *loader.Objects, frames [][]byte) ([]float64, error) {
	ns := make([]float64, len(healthLevels))
	per := max(1, r.o.Iterations/interleaveChunks)
	for range interleaveChunks {
		for i, down := range healthLevels {
			if err := writeLevel(o, down); err != nil {
				return nil, err
			}
			x, err := progRunNs(o.Steadydns, frames, per, r.o.ServerCPU, xdpTX)
			if err != nil {
				return nil, err
			}
			ns[i] += x / interleaveChunks
		}
	}
	return ns, nil
}

// loadReflector loads the bare reflector for BPF_PROG_RUN.
func loadReflector() (*ebpf.Program, func(), error) {
	var objs xdpprog.ReflectorObjects
	if err := xdpprog.LoadReflectorObjects(&objs, nil); err != nil {
		return nil, nil, fmt.Errorf("loading the reflector: %w", err)
	}
	return objs.Reflector, func() { objs.Close() }, nil
}

// quietLoadRun is one run of prog under kxdpgun asking file's queries,
// while the CPUs are quiet: the program's ns per packet, the replies a
// second, and the largest share of the CPUs other processes took. The
// client's pass afterwards checks the link still answers.
func (r *rig) quietLoadRun(ctx context.Context, prog *ebpf.Program, file string) (cost, answered, other float64, err error) {
	other, err = r.quietly(func() error {
		g, c, err := r.loadRun(ctx, prog, r.env.Edge.V4, file, r.o.Rate)
		if err != nil {
			return err
		}
		cost, answered = c, g.replies
		return r.clientPass(false)
	})
	return cost, answered, other, err
}

// measureMemory loads the record maps afresh, sized as serve sizes them
// for exactly the A and AAAA sets of n names of k candidates (a slot for
// each set, ext and pool entries for those that need them), writes the
// sets and reads each map's memlock, which bpftool map show prints. The
// harness's own maps are sized for its largest zone and K, which would
// charge a small zone for a large one's room.
func (r *rig) measureMemory(n, k int) (m MemoryResult, err error) {
	m = MemoryResult{Names: n, K: k, Sets: 2 * n}
	qtypes := []uint16{dns.TypeA, dns.TypeAAAA}
	exts, pools := 0, 0
	for _, qtype := range qtypes {
		err := recordSets(n, k, qtype, r.o, func(key loader.RecordKey, v *bpf.Set) error {
			if loader.NeedsExt(key, v) {
				exts++
			}
			if v.Pool != nil {
				pools++
			}
			return nil
		})
		if err != nil {
			return m, err
		}
	}
	// The sets again, as SyncRecords walks them: recordSets has made
	// them once without an error, and makes the same.
	errStop := errors.New("stopped")
	all := func(yield func(loader.RecordKey, *bpf.Set) bool) {
		for _, qtype := range qtypes {
			err := recordSets(n, k, qtype, r.o, func(key loader.RecordKey, v *bpf.Set) error {
				if !yield(key, v) {
					return errStop
				}
				return nil
			})
			if err != nil {
				return
			}
		}
	}
	o, err := loader.Load(loader.Options{
		BPFFS:          filepath.Join(r.bpffs, "memory"),
		HealthCapacity: healthTableSize,
		RecordCapacity: uint32(m.Sets),
		PoolCapacity:   loader.PoolsFor(pools),
		ExtCapacity:    loader.ExtsFor(exts),
		Servers:        []netip.Addr{r.env.Edge.V4, r.env.Edge.V6},
	})
	if err != nil {
		return m, err
	}
	defer func() { err = errors.Join(err, o.Unpin(), o.Close()) }()
	if err := o.SyncRecords(all); err != nil {
		return m, err
	}
	m.Spilled = o.RecordsSpilled()
	for i, mp := range []*ebpf.Map{o.Records, o.RecExts, o.RecPools} {
		info, err := mp.Info()
		if err != nil {
			return m, fmt.Errorf("reading the record maps' memory: %w", err)
		}
		b, ok := info.Memlock()
		if !ok {
			return m, fmt.Errorf("reading the record maps' memory: the kernel reports no memlock")
		}
		if i == 0 {
			m.Records = b
		} else {
			m.Ext += b
		}
	}
	m.PerSet = float64(m.Records+m.Ext) / float64(m.Sets)
	return m, nil
}

// placedFrames are the A query frames from src of the names asked whose A
// set has a slot.
func (r *rig) placedFrames(o *loader.Objects, asked []int, src netip.Addr) ([][]byte, error) {
	buf := make([]byte, 256)
	var frames [][]byte
	for _, i := range asked {
		l, err := dns.PackDomainName(nameOf(i), buf, 0, nil, false)
		if err != nil {
			return nil, fmt.Errorf("packing %s: %w", nameOf(i), err)
		}
		if !o.Spilled(loader.RecordKey{Wire: string(buf[:l]), Qtype: dns.TypeA}) {
			frames = append(frames, r.queryFrame(src, i))
		}
	}
	return frames, nil
}
