package dnsbench_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/bench/dnsbench"
	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/prober"
)

// TestMain lets this test binary play the steadydns binary: the harness
// runs `BINARY serve --config FILE`, and the fleet's aggregators `BINARY
// serve --config FILE --role R --id ID --nkey-seed F`; the tests name this
// executable as BINARY, so they need no steadydns built beforehand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serve(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	path := fs.String("config", "", "")
	role := fs.String("role", "", "")
	id := fs.String("id", "", "")
	seed := fs.String("nkey-seed", "", "")
	fs.Parse(args)
	ident := daemon.Identity{ID: *id, NKeySeed: *seed}
	var err error
	if *role != "" {
		ident.Roles, err = config.ParseRoles(*role)
	}
	var d *daemon.Daemon
	if err == nil {
		d, err = daemon.StartWith(*path, daemon.Options{Identity: ident})
	}
	if err == nil {
		err = d.Run(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// TestQuick runs the quick mode, the reflector and steadydns for a second
// per load run, and checks that every number was produced from answers
// that arrived and were right. It asserts no speed.
func TestQuick(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the benchmark loads XDP programs and builds network namespaces, so it needs root (running as uid %d)", os.Geteuid())
	}
	o := dnsbench.Quick()
	o.Duration = time.Second
	o.Prefix = "" // a unique one, so tests of other packages can run alongside
	o.Log = logWriter{t}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Binary = exe
	// The comparison with another build, run here against this build's
	// own object from the repository: the method, not a difference.
	o.CompareObject = filepath.Join("..", "..", "bpf", "steadydns_bpfel.o")
	res, err := dnsbench.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Servers) != 2 {
		t.Fatalf("measured %d servers, want the reflector and steadydns", len(res.Servers))
	}
	for _, s := range res.Servers {
		if s.Spot.Checked == 0 || s.Spot.Correct != s.Spot.Checked {
			t.Errorf("%s: %d of %d answers right; first wrong: %s", s.Name, s.Spot.Correct, s.Spot.Checked, s.Spot.Problem)
		}
		if s.Name == "steadydns" && len(s.Compliance) == 0 {
			t.Errorf("steadydns: genreport's cases did not run")
		}
		for _, r := range s.Compliance {
			if !r.OK() {
				t.Errorf("%s: %s", s.Name, r)
			}
		}
		if s.Rcodes["NOERROR"] == 0 || len(s.Rcodes) != 1 {
			t.Errorf("%s: kxdpgun's replies by rcode %v, want NOERROR only", s.Name, s.Rcodes)
		}
		if s.Answered.N != o.Runs || s.Answered.Median <= 0 || s.Offered.Median <= 0 {
			t.Errorf("%s: answered %+v of offered %+v", s.Name, s.Answered, s.Offered)
		}
		if s.KernelNs.N != o.Runs || s.KernelNs.Median <= 0 {
			t.Errorf("%s: no in-kernel cost: %+v", s.Name, s.KernelNs)
		}
		// The same load over IPv6: answered, and counted in the rcodes.
		if s.V6Answered.N != o.Runs || s.V6Answered.Median <= 0 || s.V6Ns.Median <= 0 {
			t.Errorf("%s over IPv6: answered %+v, in-kernel cost %+v", s.Name, s.V6Answered, s.V6Ns)
		}
		if s.P50.N != o.Runs || s.P50.Median <= 0 || s.P99.Median < s.P50.Median {
			t.Errorf("%s: latency p50 %+v p99 %+v", s.Name, s.P50, s.P99)
		}
	}
	if res.Servers[0].Ratio != 1 || res.Servers[1].Ratio <= 0 {
		t.Errorf("ratios to the ceiling %v and %v", res.Servers[0].Ratio, res.Servers[1].Ratio)
	}
	checkConstantWork(t, res.ConstantWork, o.RRLRounds)
	checkCompare(t, res.ConstantWork, o.RRLRounds)
	checkAggregator(t, res.Agg)

	dir := t.TempDir()
	if err := dnsbench.Write(res, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.md", "results.json", "servers.png", "constant-work.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if !strings.Contains(string(md), "| steadydns |") || !strings.Contains(string(md), "kxdpgun -t 1") ||
		!strings.Contains(string(md), "| 65535 | true |") {
		t.Errorf("results.md lacks the steadydns row or the commands:\n%s", md)
	}
}

// checkCompare checks that the comparison measured both builds for A and
// AAAA at both K, a slice of each per round and a ratio per pair.
func checkCompare(t *testing.T, w *dnsbench.ConstantWork, rounds int) {
	t.Helper()
	if w == nil || len(w.Compare) != 4 {
		t.Fatalf("comparison of builds: %+v, want 4 cells (K=1 and K=8, A and AAAA)", w)
	}
	for _, c := range w.Compare {
		if c.ThisNs.N != rounds || c.OtherNs.N != rounds || c.Ratio.N != rounds/2 ||
			c.ThisNs.Median <= 0 || c.OtherNs.Median <= 0 || c.Ratio.Median <= 0 {
			t.Errorf("comparison, %d names K=%d %s: %+v", c.Names, c.K, c.Qtype, c)
		}
	}
}

// checkConstantWork wants every constant-work cell measured both ways.
func checkConstantWork(t *testing.T, w *dnsbench.ConstantWork, rrlRounds int) {
	t.Helper()
	if w == nil || len(w.Cells) != 6 {
		t.Fatalf("constant work: %+v, want 6 cells (K=1 and K=8, three health levels)", w)
	}
	if w.PassNs.Median <= 0 {
		t.Errorf("no BPF_PROG_RUN overhead measured: %+v", w.PassNs)
	}
	for _, c := range w.Cells {
		if c.RunNs.N == 0 || c.LoadNs.Median <= 0 || c.Answered.Median <= 0 || c.Answers == 0 {
			t.Errorf("cell %d names K=%d %d%% down: %+v", c.Names, c.K, c.DownPct, c)
		}
	}
	checkWarmup(t, w.Warmup)
	// A + EDNS, AAAA and AAAA + EDNS, for K=1 and K=8: every reply
	// answered, so the XDP program answered these shapes too.
	if len(w.Variants) != 6 {
		t.Fatalf("constant work: %d query shapes measured, want 6", len(w.Variants))
	}
	for _, v := range w.Variants {
		if v.LoadNs.Median <= 0 || v.Answered.Median <= 0 {
			t.Errorf("%d names K=%d %s EDNS %v: %+v", v.Names, v.K, v.Qtype, v.EDNS, v)
		}
	}
	checkRRL(t, w.RRL, rrlRounds)
	checkLevels(t, w.Levels, rrlRounds)
	checkBreakdown(t, w.Breakdown, rrlRounds)
	checkSkew(t, w.Skew, rrlRounds)
	checkCores(t, w.Cores, rrlRounds)
}

// checkCores wants the three two-CPU cells for each K, a figure of each
// per pair of rounds. One pair on a busy machine is noisy (a full run's
// pairs span 1.2 to 3.5), so the scaling is held only to a bound no
// working measurement of two CPUs comes near.
func checkCores(t *testing.T, cells []dnsbench.CoresResult, rounds int) {
	t.Helper()
	if len(cells) != 6 {
		t.Fatalf("two CPUs: %d cells, want 6 (three cells, K=1 and K=8)", len(cells))
	}
	for i, c := range cells {
		if want := []int{1, 1, 1, 8, 8, 8}[i]; c.K != want {
			t.Errorf("two CPUs, cell %d: K=%d, want %d", i, c.K, want)
		}
		for _, s := range []stats.Summary{c.AloneNs, c.TogetherNs, c.Scaling} {
			if s.N != rounds/2 || s.Median <= 0 {
				t.Errorf("two CPUs, K=%d, %s: %+v, want %d pairs", c.K, c.Cell, s, rounds/2)
			}
		}
		if c.Scaling.Median > 4 {
			t.Errorf("two CPUs, K=%d, %s: %.2f times one CPU's queries", c.K, c.Cell, c.Scaling.Median)
		}
	}
}

// checkSkew wants the uniform and the Zipf mix for each K, the program and
// the reflector a slice each per round, and the Zipf mix skewed: its
// hottest 1% of the names (10 of 1,000) take far more than 1% of the
// queries, where the uniform mix gives them exactly 1%.
func checkSkew(t *testing.T, cells []dnsbench.SkewResult, rounds int) {
	t.Helper()
	if len(cells) != 4 {
		t.Fatalf("query mixes: %d cells, want 4 (uniform and zipf, K=1 and K=8)", len(cells))
	}
	for i, c := range cells {
		if want := []string{"uniform", "zipf"}[i%2]; c.Mix != want {
			t.Errorf("query mix %d: %q, want %q", i, c.Mix, want)
		}
		if c.Mix == "uniform" && c.Top1Pct != 0.01 || c.Mix == "zipf" && (c.Top1Pct < 0.35 || c.Top1Pct > 0.43) {
			t.Errorf("%s mix, K=%d: the hottest 1%% took %.3f of the queries", c.Mix, c.K, c.Top1Pct)
		}
		for _, s := range []stats.Summary{c.ProgramNs, c.ReflectorNs} {
			if s.N != rounds || s.Median <= 0 {
				t.Errorf("%s mix, K=%d: a cell measured %+v, want %d slices", c.Mix, c.K, s, rounds)
			}
		}
		if c.OverReflector.N != rounds/2 || c.OverReflector.Median <= 0 {
			t.Errorf("%s mix, K=%d: ratio %+v, want %d pairs", c.Mix, c.K, c.OverReflector, rounds/2)
		}
	}
}

// checkBreakdown wants the program, the table read and the reflector measured
// for each K, a slice of each per round and each ratio per pair of rounds.
func checkBreakdown(t *testing.T, cells []dnsbench.BreakdownResult, rounds int) {
	t.Helper()
	if len(cells) != 2 {
		t.Fatalf("table read: %d cells, want 2 (K=1 and K=8)", len(cells))
	}
	for _, c := range cells {
		for _, s := range []stats.Summary{c.ProgramNs, c.TableReadNs, c.ReflectorNs} {
			if s.N != rounds || s.Median <= 0 {
				t.Errorf("table read, %d names K=%d: a cell measured %+v, want %d slices", c.Names, c.K, s, rounds)
			}
		}
		for _, s := range []stats.Summary{c.OverReflector, c.TableReadOverReflector, c.OverTableRead} {
			if s.N != rounds/2 || s.Median <= 0 {
				t.Errorf("table read, %d names K=%d: a ratio %+v, want %d pairs", c.Names, c.K, s, rounds/2)
			}
		}
		var names []string
		for _, st := range c.Stages {
			names = append(names, st.Name)
			if st.Ns.N != rounds || st.Ns.Median <= 0 || st.Adds.N != rounds/2 {
				t.Errorf("stages, %d names K=%d: %s measured %+v, adding %+v; want %d slices and %d pairs", c.Names, c.K, st.Name, st.Ns, st.Adds, rounds, rounds/2)
			}
		}
		if want := []string{"parse", "hash", "lookup", "select", "grow", "write"}; !slices.Equal(names, want) {
			t.Errorf("stages, %d names K=%d: %v, want %v", c.Names, c.K, names, want)
		} else if w := c.Stages[len(c.Stages)-1]; w.Ns != c.ProgramNs {
			t.Errorf("stages, %d names K=%d: write's cut %+v is not the program's %+v", c.Names, c.K, w.Ns, c.ProgramNs)
		}
	}
}

// checkWarmup wants a warm-up before each K's cells that stopped at the
// first run within 10% of the one before it, or at the sixth.
func checkWarmup(t *testing.T, runs []dnsbench.WarmupResult) {
	t.Helper()
	if len(runs) != 2 || runs[0].K != 1 || runs[1].K != 8 {
		t.Fatalf("warm-up: %+v, want one before K=1's cells and one before K=8's", runs)
	}
	for _, x := range runs {
		l := len(x.LoadNs)
		if l < 2 || l > 6 || slices.ContainsFunc(x.LoadNs, func(v float64) bool { return v <= 0 }) {
			t.Errorf("warm-up, %d names K=%d: runs %v, want 2 to 6 measured", x.Names, x.K, x.LoadNs)
			continue
		}
		within := func(i int) bool { return math.Abs(x.LoadNs[i]-x.LoadNs[i-1]) <= 0.1*x.LoadNs[i-1] }
		for i := 1; i < l-1; i++ {
			if within(i) {
				t.Errorf("warm-up, %d names K=%d: runs %v went on after run %d had settled", x.Names, x.K, x.LoadNs, i+1)
			}
		}
		if within(l-1) != x.Settled || !x.Settled && l < 6 {
			t.Errorf("warm-up, %d names K=%d: runs %v, settled %v", x.Names, x.K, x.LoadNs, x.Settled)
		}
	}
}

// checkLevels wants the three health levels of K=1 and K=8 measured in
// paired slices: a slice of each per round, and each level read against
// 0% down, one ratio per pair of rounds; 0% down against itself is 1.
func checkLevels(t *testing.T, cells []dnsbench.LevelResult, rounds int) {
	t.Helper()
	if len(cells) != 6 {
		t.Fatalf("health levels in slices: %d cells, want 6 (K=1 and K=8, three levels)", len(cells))
	}
	for _, c := range cells {
		if c.LoadNs.N != rounds || c.LoadNs.Median <= 0 || c.Ratio.N != rounds/2 || c.Ratio.Median <= 0 ||
			c.RatioCI[0] > c.Ratio.Median || c.RatioCI[1] < c.Ratio.Median || c.DownPct == 0 && c.Ratio.Median != 1 {
			t.Errorf("health levels in slices, K=%d %d%% down: %+v", c.K, c.DownPct, c)
		}
	}
}

// checkRRL wants rate limiting's six cells for K=1 and K=8, with what a
// user sees of each: on, every query answered; over the limit, with slip
// 0 next to nothing, with slip 2 about every second query answered; and
// every cell but the references read against its reference, one ratio
// per pair of rounds.
func checkRRL(t *testing.T, cells []dnsbench.RRLResult, rounds int) {
	t.Helper()
	if len(cells) != 12 {
		t.Fatalf("rrl: %d cells, want 12 (K=1 and K=8: off, off again, on, on with one name, limited with slip 0 and 2)", len(cells))
	}
	for i := 0; i < len(cells); i += 6 {
		off, again, on, one, slip0, slip2 := cells[i], cells[i+1], cells[i+2], cells[i+3], cells[i+4], cells[i+5]
		for _, c := range []dnsbench.RRLResult{off, again, on, one, slip0, slip2} {
			if c.LoadNs.Median <= 0 || c.LoadNs.N != rounds {
				t.Errorf("rrl K=%d %s one name %v: no cost measured in each of %d rounds: %+v", c.K, c.Cell, c.OneName, rounds, c)
			}
		}
		for c, ref := range map[dnsbench.RRLResult]string{off: "", again: "off", on: "off", one: "", slip0: "on", slip2: "on"} {
			if c.Reference != ref || (ref == "") != (c.Ratio.N == 0) || ref != "" && (c.Ratio.N != rounds/2 || c.Ratio.Median <= 0 ||
				c.RatioCI[0] > c.Ratio.Median || c.RatioCI[1] < c.Ratio.Median) {
				t.Errorf("rrl K=%d %s one name %v: ratio %+v (CI %v) to %q, want one per pair of rounds to %q", c.K, c.Cell, c.OneName, c.Ratio, c.RatioCI, c.Reference, ref)
			}
		}
		for _, c := range []dnsbench.RRLResult{off, again, on, one} {
			if c.Limited != 0 || c.Answered.Median <= 0 {
				t.Errorf("rrl K=%d %s one name %v: %.3f limited, %v answered/s", c.K, c.Cell, c.OneName, c.Limited, c.Answered.Median)
			}
		}
		if slip0.Limited < 0.9 || slip0.Answered.Median*100 > one.Answered.Median {
			t.Errorf("rrl K=%d slip 0: %.3f limited, %v answered/s against %v unlimited", slip0.K, slip0.Limited, slip0.Answered.Median, one.Answered.Median)
		}
		// The program's own counters, not rates measured minutes apart on a
		// shared CPU: slip 2 sends every second limited reply truncated.
		if slip0.Slipped != 0 {
			t.Errorf("rrl K=%d slip 0: %.3f of the limited replies slipped, want none", slip0.K, slip0.Slipped)
		}
		if slip2.Limited < 0.9 || slip2.Slipped < 0.45 || slip2.Slipped > 0.55 || slip2.Answered.Median <= 0 {
			t.Errorf("rrl K=%d slip 2: %.3f limited, %.3f of them slipped (want 0.5), %v answered/s", slip2.K, slip2.Limited, slip2.Slipped, slip2.Answered.Median)
		}
	}
}

// checkAggregator wants all four aggregator cells measured, with frames and
// tables of the same size whatever the number of checks.
func checkAggregator(t *testing.T, a *dnsbench.Aggregator) {
	t.Helper()
	if a == nil || len(a.Cells) != 4 {
		t.Fatalf("aggregator: %+v, want 4 cells (10 and 65,535 checks, passing and failing)", a)
	}
	if a.FrameBytes != prober.FrameSize(65536) || a.TableBytes <= 0 {
		t.Errorf("aggregator frame %d bytes, table %d bytes", a.FrameBytes, a.TableBytes)
	}
	for _, c := range a.Cells {
		if c.PushMs.N == 0 || c.PushMs.Median <= 0 || c.IngestMs.Median <= 0 || c.IngestMs.Median >= c.PushMs.Median {
			t.Errorf("aggregator %d checks failing=%v: push %+v, ingest %+v", c.Checks, c.Failing, c.PushMs, c.IngestMs)
		}
	}
	if a.Spread.N == 0 || a.Spread.Min < 0 {
		t.Errorf("aggregator spread %+v", a.Spread)
	}
}

// logWriter sends the harness's progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
