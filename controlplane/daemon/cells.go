package daemon

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/loader"
)

// hostCell is the cell this host's prober and aggregator belong to:
// --cell, or the first of cluster.cells.
func (id Identity) hostCell(cfg *config.Config) (string, error) {
	if id.Cell == "" {
		return cfg.Cluster.Cells[0].Name, nil
	}
	if _, ok := cfg.Cell(id.Cell); !ok {
		return "", cfg.Errorf("cluster.cells", "--cell %s is not in cluster.cells (%v)", id.Cell, cfg.CellNames())
	}
	return id.Cell, nil
}

// merger builds the table an edge writes from every cell's tables: the
// entries of a cell's checks come from the aggregator the edge follows in
// that cell, each cell's follower choosing as one follower does for a
// fleet of one cell. Every table of every cell is merged entry by entry
// over the whole table, so the work per table is constant.
type merger struct {
	timeout time.Duration

	mu      sync.Mutex
	cells   []string
	owner   []int16 // per entry: the index in cells of the cell whose tables own it; -1 none
	follow  []*follower
	arrived []uint64 // per cell, on the boot clock, when its last table was taken; 0 none yet
	buf     []byte   // the merged table
	version uint64
}

// stride is the size of one entry in a table.
var stride = healthtable.Bytes(1)

// noOwner marks entries no cell's tables write: entry 0 and unused ones.
const noOwner = -1

func newMerger(timeout time.Duration, tableSize int) *merger {
	g := &merger{timeout: timeout, buf: make([]byte, healthtable.Bytes(tableSize)), owner: make([]int16, tableSize)}
	// Entry 0 belongs to candidates without a check.
	healthtable.Put(g.buf, 0, true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC))
	return g
}

// configure takes a plan's cells and check indexes. A cell that stays
// keeps its follower and its last arrival; the entries of a cell not heard
// from yet fail open, as a cold edge's all do.
func (g *merger) configure(p *Plan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cells := p.Config.CellNames()
	follow := make([]*follower, len(cells))
	arrived := make([]uint64, len(cells))
	for i, c := range cells {
		follow[i] = &follower{timeout: g.timeout}
		if j := slices.Index(g.cells, c); j >= 0 {
			follow[i], arrived[i] = g.follow[j], g.arrived[j]
		}
	}
	g.cells, g.follow, g.arrived = cells, follow, arrived
	for i := range g.owner {
		g.owner[i] = noOwner
	}
	for k := range p.Index.Len() {
		i := p.Index.EntryOf(k)
		c := int16(slices.Index(cells, p.Config.Checks.Cell(k)))
		g.owner[i] = c
		if g.arrived[c] == 0 {
			healthtable.Put(g.buf, i, true, uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS))
		}
	}
}

// take merges table m if it comes from the aggregator followed in its cell
// and writes the merged table through write, stamped with the oldest of
// the cells' last arrivals: the table is as stale as its stalest cell.
// Cells not heard from yet do not hold the stamp back; their entries fail
// open.
func (g *merger) take(m transport.Message, now time.Time, write func(table []byte, version, arrivedNs uint64) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := slices.Index(g.cells, m.Cell)
	if c < 0 {
		return fmt.Errorf("table from %s of cell %q, which is not in cluster.cells", m.Sender, m.Cell)
	}
	// A table of the wrong size is refused before it counts as the
	// sender's: an aggregator whose tables cannot be used is not followed.
	if len(m.Payload) != len(g.buf) {
		return fmt.Errorf("table from %s: %d bytes, want %d", m.Sender, len(m.Payload), len(g.buf))
	}
	if !g.follow[c].take(m.Sender, now) {
		return nil
	}
	for i, o := range g.owner {
		if int(o) == c {
			copy(g.buf[i*stride:(i+1)*stride], m.Payload[i*stride:])
		}
	}
	g.arrived[c] = loader.BootNs()
	g.version = max(g.version, m.Slot)
	oldest := g.arrived[c]
	for _, a := range g.arrived {
		if a != 0 {
			oldest = min(oldest, a)
		}
	}
	return write(g.buf, g.version, oldest)
}

// following is the aggregator followed in each cell that has one.
func (g *merger) following() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for i, c := range g.cells {
		if f := g.follow[i].following(); f != "" {
			out[c] = f
		}
	}
	return out
}

// switches counts the switches of every cell's follower.
func (g *merger) switches() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n uint64
	for _, f := range g.follow {
		n += f.switches.Load()
	}
	return n
}

// checkers remembers when an aggregator last heard each checker of its
// cell, for the capacity it uses.
type checkers struct {
	mu    sync.Mutex
	heard map[string]time.Time
}

func (c *checkers) hear(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heard == nil {
		c.heard = map[string]time.Time{}
	}
	c.heard[id] = now
}

// count is how many checkers were heard within timeout of now; the others
// are forgotten.
func (c *checkers) count(now time.Time, timeout time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, t := range c.heard {
		if now.Sub(t) > timeout {
			delete(c.heard, id)
		}
	}
	return len(c.heard)
}

// The resources of a cell's capacity, as the metrics name them.
const (
	resourceProberChecks  = "prober_checks"
	resourceCheckerChecks = "aggregator_checker_checks"
	resourceEdges         = "aggregator_edges"
)

// capacity is this host's use of its cell's capacity, per role it plays:
// a prober the checks it runs, an aggregator the checkers it hears times
// the entries of their frames, and an aggregator with an embedded server
// the edges connected to it.
func (d *Daemon) capacity(p *Plan) []api.CapacityView {
	f := d.fleet
	if f == nil {
		return nil
	}
	capa := p.Config.Cluster.Capacity
	var out []api.CapacityView
	if d.sched != nil {
		n := 0
		checks := &p.Config.Checks
		for k := range checks.Len() {
			if _, probed := checks.Type(k).Probed(); probed && checks.Cell(k) == f.cell {
				n++
			}
		}
		out = append(out, api.CapacityView{Resource: resourceProberChecks, Used: n, Limit: capa.ChecksPerProber})
	}
	if d.agg != nil {
		n := f.checkers.count(time.Now(), p.Config.Aggregation.CheckerTimeout) * p.Config.FrameEntries()
		out = append(out, api.CapacityView{Resource: resourceCheckerChecks, Used: n, Limit: capa.CheckerChecksPerAggregator})
	}
	if f.srv != nil {
		var keys []string
		for _, id := range p.Config.Cluster.NATS.HostsWith(config.RoleEdge) {
			keys = append(keys, p.Config.Cluster.NATS.Hosts[id].Key)
		}
		if n, err := f.srv.ClientsWithKeys(keys); err != nil {
			slog.Warn("counting the edges connected", "error", err)
		} else {
			out = append(out, api.CapacityView{Resource: resourceEdges, Used: n, Limit: capa.EdgesPerAggregator})
		}
	}
	return out
}
