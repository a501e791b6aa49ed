package dnsbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"runtime"
	"time"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/loader"
	"github.com/steadydns/steadydns/prober"
)

// Aggregator is the aggregator's constant work: ingesting one checker's
// frame and pushing the whole health table into the BPF map, for few and
// for all configured checks, all passing or all failing.
type Aggregator struct {
	Cells      []AggregatorResult
	Spread     stats.Summary // per run: the dearest cell's cost over the cheapest's, minus one, in percent
	FrameBytes int
	TableBytes int
	Rounds     int // pushes per cell per run
}

// AggregatorResult is one cell: how many checks are configured, and
// whether they fail.
type AggregatorResult struct {
	Checks   int
	Failing  bool
	PushMs   stats.Summary // ingest and push, ms per push
	IngestMs stats.Summary // of which ingesting the frame
}

// aggCell is one aggregator under test: a table with its checks and a
// frame from one checker that reports every one of them.
type aggCell struct {
	table         *health.Aggregator
	frame         []byte
	ingest, total time.Duration
}

const aggTable = 65536 // the health table's default size

// aggregator builds the four aggregators over one set of BPF maps and
// times them taking turns inside every round, so drift on the machine
// (other tenants, memory reclaim) falls on all of them alike. Everything
// runs on the server's CPU.
func (r *rig) aggregator() (a *Aggregator, err error) {
	fmt.Fprintf(r.o.Log, "bench: aggregator cost per push\n")
	o, err := loader.Load(loader.Options{BPFFS: filepath.Join(r.bpffs, "aggregator"), HealthCapacity: aggTable,
		Servers: []netip.Addr{r.env.Edge.V4}})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, o.Unpin(), o.Close()) }()
	a = &Aggregator{TableBytes: healthtable.Bytes(aggTable), Rounds: r.o.PushRounds}
	var cells []*aggCell
	for _, n := range []int{10, aggTable - 1} { // entry 0 is reserved
		for _, failing := range []bool{false, true} {
			c, err := newAggCell(o, n, failing)
			if err != nil {
				return nil, err
			}
			cells = append(cells, c)
			a.Cells = append(a.Cells, AggregatorResult{Checks: n, Failing: failing})
			a.FrameBytes = len(c.frame)
		}
	}
	push := make([][]float64, len(cells))
	ingest := make([][]float64, len(cells))
	var spread []float64
	now := time.Unix(1_000_000, 0)
	for range r.o.Runs {
		_, err := r.quietly(func() error {
			// The setup's and the last run's garbage goes now, not
			// inside the timings.
			runtime.GC()
			return onCPU(r.o.ServerCPU, func() error {
				for _, c := range cells {
					c.ingest, c.total = 0, 0
				}
				for range r.o.PushRounds {
					now = now.Add(time.Second)
					for _, c := range cells {
						if err := c.round(now); err != nil {
							return err
						}
					}
				}
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
		lo, hi := cells[0].total, cells[0].total
		for i, c := range cells {
			push[i] = append(push[i], ms(c.total)/float64(r.o.PushRounds))
			ingest[i] = append(ingest[i], ms(c.ingest)/float64(r.o.PushRounds))
			lo, hi = min(lo, c.total), max(hi, c.total)
		}
		spread = append(spread, 100*(float64(hi)/float64(lo)-1))
	}
	for i := range a.Cells {
		a.Cells[i].PushMs, a.Cells[i].IngestMs = stats.Summarize(push[i]), stats.Summarize(ingest[i])
	}
	a.Spread = stats.Summarize(spread)
	return a, nil
}

func newAggCell(o *loader.Objects, n int, failing bool) (*aggCell, error) {
	cfg := &config.Config{Hash: 1, Aggregation: config.Aggregation{PushInterval: time.Second, Quorum: 0.18, TableSize: aggTable}}
	checks := make([]*config.Check, n)
	for i := range n {
		checks[i] = &config.Check{ID: fmt.Sprintf("c%d", i), Type: config.CheckTCP, Interval: time.Second,
			UnhealthyThreshold: 1, HealthyThreshold: 1, Admin: health.AdminAuto}
	}
	cfg.Checks = config.NewChecks(checks)
	index, err := health.Assign(cfg.Checks, nil, aggTable)
	if err != nil {
		return nil, err
	}
	// The edge's table writes into the maps, as on a server.
	t, err := health.New(cfg, index, edge.New(o, bpf.SteadydnsTableMeta{}), health.Seed{}, &health.EventLog{})
	if err != nil {
		return nil, err
	}
	framer, err := prober.NewFramer("bench", "", aggTable)
	if err != nil {
		return nil, err
	}
	probes := map[string]prober.Probe{}
	for k, c := range checks {
		probes[c.ID] = prober.Probe{Index: index.EntryOf(k)}
	}
	if err := framer.Configure(cfg.Hash, probes); err != nil {
		return nil, err
	}
	for k, c := range checks {
		framer.Record(prober.Result{ID: c.ID, Index: index.EntryOf(k), Seq: 1, Healthy: !failing})
	}
	return &aggCell{table: t, frame: framer.AppendFrame(nil, 1)}, nil
}

// round gives every result in the frame a new seq, as the next interval's
// results would have, then times ingesting the frame and pushing the table.
// Renumbering is the prober's work and is not timed.
func (c *aggCell) round(now time.Time) error {
	for p := prober.HeaderSize; p+prober.EntrySize <= len(c.frame); p += prober.EntrySize {
		if seq := binary.LittleEndian.Uint64(c.frame[p+8:]); seq != 0 {
			binary.LittleEndian.PutUint64(c.frame[p+8:], seq+1)
		}
	}
	t0 := time.Now()
	if err := c.table.IngestFrame(c.frame, now); err != nil {
		return err
	}
	t1 := time.Now()
	if err := c.table.Push(now); err != nil {
		return err
	}
	c.ingest += t1.Sub(t0)
	c.total += time.Since(t0)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
