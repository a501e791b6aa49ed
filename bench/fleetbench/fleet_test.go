package fleetbench_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/bench/fleetbench"
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

// TestFleetQuick runs the fleet's constancy cells over real NATS servers
// for a few pushes, twice: aggregator processes fed by a prober's frames, an
// edge reassembling their tables, and new aggregator processes for the
// second run. It checks that the tables carry the probers'
// verdicts and that every link carried the same bytes per push in every
// cell, loosely: a push delayed past the window's edge by a loaded machine
// moves one table in or out. It asserts no CPU figure.
func TestFleetQuick(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the fleet benchmark pins threads and runs aggregators as root (running as uid %d)", os.Geteuid())
	}
	o := fleetbench.FleetQuick()
	// Loading a config of 65,535 checks takes seconds, twice per cell;
	// the full run has that row, the test needs only few and many.
	o.Checks = []int{10, 5000}
	// The second run starts new aggregators: their tables must carry the
	// verdicts too.
	o.Runs = 2
	o.Log = logWriter{t}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Binary = exe
	res, err := fleetbench.RunFleet(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 5 {
		t.Fatalf("%d cells, want 10 and 5,000 checks each 0%% and 100%% unhealthy, and the first's repeat", len(res.Cells))
	}
	if repeat := res.Cells[4]; !repeat.Again || repeat.Checks != 10 || repeat.Unhealthy != 0 {
		t.Errorf("the last cell is %+v, want the repeat of 10 checks at 0%%", repeat)
	}
	// The first cell over the mean of itself and its repeat is 2/(1+t) in a
	// run where the repeat over the first is t.
	if r, tw := res.Cells[0].Ratio, res.Cells[4].Ratio; math.Abs(r.Max-2/(1+tw.Min)) > 1e-9 || math.Abs(r.Min-2/(1+tw.Max)) > 1e-9 {
		t.Errorf("the first cell over the reference %+v, its repeat over it %+v: not read against the two's mean", r, tw)
	}
	// 5,000 checks over 10, and 100% unhealthy over 0%, one ratio per run.
	if len(res.Effects) != 2 || res.Effects[0].Level != 5000 || res.Effects[1].Level != 100 ||
		res.Effects[0].Ratio.N != 2 || res.Effects[1].Ratio.N != 2 || res.Effects[0].Ratio.Min <= 0 {
		t.Errorf("effects %+v, want 5,000 checks over 10 and 100%% unhealthy over 0%%, a ratio per run", res.Effects)
	}
	first := res.Cells[0].Bytes
	for _, c := range res.Cells {
		// Each cell's ratio to the reference, one per run.
		if c.Ratio.N != 2 || c.Ratio.Min <= 0 || c.RatioCI[0] > c.Ratio.Median || c.RatioCI[1] < c.Ratio.Median {
			t.Errorf("%d checks %d%% unhealthy: ratio to the reference %+v (CI %v), want one per run", c.Checks, c.Unhealthy, c.Ratio, c.RatioCI)
		}
		if want := c.Checks * c.Unhealthy / 100; c.Down != want {
			t.Errorf("%d checks %d%% unhealthy: the edge's table has %d entries down, want %d", c.Checks, c.Unhealthy, c.Down, want)
		}
		if c.TableBytes != 65536*8 || c.FrameBytes != prober.FrameSize(65536) {
			t.Errorf("%d checks %d%% unhealthy: table %d bytes, frame %d", c.Checks, c.Unhealthy, c.TableBytes, c.FrameBytes)
		}
		if c.CPUMs.N != 2 || c.CPUMs.Min <= 0 {
			t.Errorf("%d checks %d%% unhealthy: no aggregator CPU measured: %+v", c.Checks, c.Unhealthy, c.CPUMs)
		}
		for _, l := range []string{"prober → NATS", "NATS → aggregator", "aggregator → NATS", "NATS → edge"} {
			// A frame or table per push at least; a loaded machine may
			// shift one push of the window's 8 in or out.
			if b, b0 := c.Bytes[l], first[l]; b < float64(c.TableBytes) || b > 1.3*b0 || b < b0/1.3 {
				t.Errorf("%d checks %d%% unhealthy: %s carried %.0f bytes per push, the first cell %.0f", c.Checks, c.Unhealthy, l, b, b0)
			}
		}
	}
	dir := t.TempDir()
	if err := fleetbench.WriteFleet(res, dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "fleet.md"))
	for _, row := range []string{"| 5000 | 100% |", "| 10 | 0% again |", "| 5000 checks | 10 checks |", "| 100% unhealthy | 0% unhealthy |"} {
		if !strings.Contains(string(md), row) {
			t.Errorf("fleet.md lacks the row %q:\n%s", row, md)
		}
	}
}

// logWriter sends the harness's progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
