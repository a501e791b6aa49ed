package edge

import (
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/loader"
)

// Merger builds the table an edge of a fleet writes from every cell's
// tables: the entries of a cell's checks come from the aggregator the edge
// follows in that cell, each cell's follower choosing as one follower does
// for a fleet of one cell. Every table of every cell is merged entry by
// entry over the whole table, so the work per table is constant.
type Merger struct {
	timeout time.Duration

	mu      sync.Mutex
	cells   []string
	owner   []int16 // per entry: the index in cells of the cell whose tables own it; -1 none
	follow  []*follower
	arrived []uint64 // per cell, on the boot clock, when its last table was taken; 0 none yet
	buf     []byte   // the merged table
	version uint64
}

// noOwner marks entries no cell's tables write: entry 0 and unused ones.
const noOwner = -1

// NewMerger returns a merger of tables of tableSize entries that follows
// another aggregator of a cell after timeout without a table from the
// one it follows.
func NewMerger(timeout time.Duration, tableSize int) *Merger {
	g := &Merger{timeout: timeout, buf: make([]byte, healthtable.Bytes(tableSize)), owner: make([]int16, tableSize)}
	// Entry 0 belongs to candidates without a check.
	healthtable.Put(g.buf, 0, true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC))
	return g
}

// Configure takes a config's cells and, for each check, its entry and
// cell. A cell that stays keeps its follower and its last arrival; the
// entries of a cell not heard from yet fail open, as a cold edge's all do.
func (g *Merger) Configure(cells []string, checks iter.Seq2[uint32, string]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	follow := make([]*follower, len(cells))
	arrived := make([]uint64, len(cells))
	for i, c := range cells {
		follow[i] = &follower{timeout: g.timeout}
		if j := slices.Index(g.cells, c); j >= 0 {
			follow[i], arrived[i] = g.follow[j], g.arrived[j]
		}
	}
	g.cells, g.follow, g.arrived = slices.Clone(cells), follow, arrived
	for i := range g.owner {
		g.owner[i] = noOwner
	}
	for i, cell := range checks {
		c := int16(slices.Index(cells, cell))
		g.owner[i] = c
		if g.arrived[c] == 0 {
			healthtable.Put(g.buf, i, true, uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS))
		}
	}
}

// Take merges table, published by sender in cell for slot, if it comes
// from the aggregator followed in that cell, and writes the merged table
// through write, stamped with the oldest of the cells' last arrivals: the
// table is as stale as its stalest cell. Cells not heard from yet do not
// hold the stamp back; their entries fail open.
func (g *Merger) Take(cell, sender string, slot uint64, table []byte, now time.Time, write func(table []byte, version, arrivedNs uint64) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := slices.Index(g.cells, cell)
	if c < 0 {
		return fmt.Errorf("table from %s of cell %q, which is not in cluster.cells", sender, cell)
	}
	// A table of the wrong size is refused before it counts as the
	// sender's: an aggregator whose tables cannot be used is not followed.
	if len(table) != len(g.buf) {
		return fmt.Errorf("table from %s: %d bytes, want %d", sender, len(table), len(g.buf))
	}
	if !g.follow[c].take(sender, now) {
		return nil
	}
	const stride = healthtable.Stride
	for i, o := range g.owner {
		if int(o) == c {
			copy(g.buf[i*stride:(i+1)*stride], table[i*stride:])
		}
	}
	g.arrived[c] = loader.BootNs()
	g.version = max(g.version, slot)
	oldest := g.arrived[c]
	for _, a := range g.arrived {
		if a != 0 {
			oldest = min(oldest, a)
		}
	}
	return write(g.buf, g.version, oldest)
}

// Following is the aggregator followed in each cell that has one.
func (g *Merger) Following() map[string]string {
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

// Switches counts the switches of every cell's follower.
func (g *Merger) Switches() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n uint64
	for _, f := range g.follow {
		n += f.switches.Load()
	}
	return n
}
