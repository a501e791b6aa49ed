package config

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Cell is a group of probers and aggregators: its probers run only its
// checks and send their frames only to its aggregators, so a fleet grows
// by adding cells rather than by making every prober and aggregator do
// more.
type Cell struct {
	Name        string // one NATS subject token: letters, digits, '_' and '-'
	Probers     int    // prober hosts the cell runs; 0 only for the implicit cell
	Aggregators int    // aggregator hosts the cell runs; 0 only for the implicit cell
}

// DefaultCell names the one cell of a config without cluster.cells.
const DefaultCell = "default"

// Capacity is what one host of each role sustains. The defaults are what
// `make bench-fleet` finds; a fleet on other hardware runs it and sets its
// own.
type Capacity struct {
	// ChecksPerProber is the most probed checks a prober runs. In a fleet
	// it is also the number of entries of every result frame, so a frame
	// costs the same every period whatever its cell holds.
	ChecksPerProber int
	// CheckerChecksPerAggregator bounds a cell's probers × frame entries:
	// the entries an aggregator ingests every push period.
	CheckerChecksPerAggregator int
	// EdgesPerAggregator is the most edges one aggregator's NATS server
	// sends tables to every push period.
	EdgesPerAggregator int
}

// The default capacities, from the "Checks per prober", "Probers per
// aggregator" and "Edges per aggregator" tables of `make bench-fleet`
// (docs/fleet.md): a prober keeps 50,000 TCP checks every 10 s on time;
// an aggregator keeps up with 40 probers' frames of 65,536 entries, so
// its bound is 40 × 65,536 entries; and one aggregator, its NATS server
// embedded, sends every table to 1,600 edges.
const (
	DefaultChecksPerProber            = 50000
	DefaultCheckerChecksPerAggregator = 40 * 65536
	DefaultEdgesPerAggregator         = 1600
)

var (
	cellKeys     = []string{"name", "probers", "aggregators"}
	capacityKeys = []string{"checks_per_prober", "checker_checks_per_aggregator", "edges_per_aggregator"}
)

func (d *decoder) cells(f fields) []Cell {
	if !f.has("cells") {
		return []Cell{{Name: DefaultCell}}
	}
	var out []Cell
	f.list("cells", func(path string, n *yaml.Node) {
		cf := d.mapping(n, path, cellKeys)
		var c Cell
		cf.str("name", &c.Name)
		cf.int("probers", &c.Probers)
		cf.int("aggregators", &c.Aggregators)
		out = append(out, c)
	})
	return out
}

func (d *decoder) capacity(f fields) Capacity {
	c := Capacity{DefaultChecksPerProber, DefaultCheckerChecksPerAggregator, DefaultEdgesPerAggregator}
	cf := f.mapping("capacity", capacityKeys)
	cf.int("checks_per_prober", &c.ChecksPerProber)
	cf.int("checker_checks_per_aggregator", &c.CheckerChecksPerAggregator)
	cf.int("edges_per_aggregator", &c.EdgesPerAggregator)
	return c
}

// FrameEntries is how many entries every result frame holds. In a fleet it
// is a prober's capacity, the same for every cell and every config, so a
// frame's size never follows what its cell holds; on a single host it is
// the whole table, as the in-process aggregator takes it.
func (c *Config) FrameEntries() int {
	if c.Cluster.NATS == nil {
		return c.Aggregation.TableSize
	}
	return min(c.Cluster.Capacity.ChecksPerProber, c.Aggregation.TableSize)
}

// Cell returns the cell named name.
func (c *Config) Cell(name string) (Cell, bool) {
	for _, cell := range c.Cluster.Cells {
		if cell.Name == name {
			return cell, true
		}
	}
	return Cell{}, false
}

// CellNames lists the cells in config order.
func (c *Config) CellNames() []string {
	out := make([]string, len(c.Cluster.Cells))
	for i, cell := range c.Cluster.Cells {
		out[i] = cell.Name
	}
	return out
}

// maxCellName keeps a cell name short enough for the subjects it is part of.
const maxCellName = 32

// cells validates cluster.cells and cluster.capacity, gives every check
// its cell, and, in a fleet, refuses a cell that holds more than its
// probers and aggregators sustain (Capacity).
func (v *validator) cells() {
	cl := &v.c.Cluster
	if len(cl.Cells) == 0 {
		v.errorf("cluster.cells", "at least one cell is required")
		return
	}
	index := map[string]int{}
	for i, cell := range cl.Cells {
		key := fmt.Sprintf("cluster.cells[%d]", i)
		switch {
		case cell.Name == "":
			v.errorf(key+".name", "required")
		case len(cell.Name) > maxCellName || strings.ContainsFunc(cell.Name, func(r rune) bool { return !validIDRune(r) }):
			// The name is a token of the frame and table subjects.
			v.errorf(key+".name", "cell name %q: want 1 to %d letters, digits, '_' or '-'", cell.Name, maxCellName)
		default:
			if j, dup := index[cell.Name]; dup {
				v.errorf(key+".name", "duplicate cell %q, first at line %d", cell.Name, v.c.Line(fmt.Sprintf("cluster.cells[%d].name", j)))
			}
			index[cell.Name] = i
		}
		if v.c.Line(key) != 0 {
			for _, k := range []struct {
				name string
				n    int
			}{{"probers", cell.Probers}, {"aggregators", cell.Aggregators}} {
				if k.n < 1 {
					v.errorf(key+"."+k.name, "want at least 1 (how many %s hosts the cell runs), got %d", strings.TrimSuffix(k.name, "s"), k.n)
				}
			}
		}
	}
	capa := cl.Capacity
	for _, k := range []struct {
		name string
		n    int
	}{{"checks_per_prober", capa.ChecksPerProber}, {"checker_checks_per_aggregator", capa.CheckerChecksPerAggregator}, {"edges_per_aggregator", capa.EdgesPerAggregator}} {
		if k.n < 1 {
			v.errorf("cluster.capacity."+k.name, "want at least 1, got %d", k.n)
		}
	}
	if cl.Edges < 0 {
		v.errorf("cluster.edges", "must not be negative, got %d", cl.Edges)
	}
	probed := map[string]int{}
	for _, c := range v.checks {
		id := c.ID
		if c.Cell == "" {
			c.Cell = cl.Cells[0].Name
		} else if _, ok := index[c.Cell]; !ok {
			v.errorf("health_checks."+id+".cell", "unknown cell %q: define it under cluster.cells", c.Cell)
			continue
		}
		if _, ok := c.Type.Probed(); ok {
			probed[c.Cell]++
		}
	}
	for _, c := range v.checks {
		id := c.ID
		for i, child := range c.Children {
			// A cell's aggregators see only their own cell's states.
			if ch, ok := v.byID[child]; ok && ch.Cell != c.Cell {
				v.errorf(fmt.Sprintf("health_checks.%s.children[%d]", id, i), "%s is in cell %q, %s in cell %q: a calculated check's children must be in its cell", child, ch.Cell, id, c.Cell)
			}
		}
	}
	if cl.NATS == nil || len(v.errs) > 0 {
		// One process plays every role: there is no cell to fill.
		return
	}
	for i, cell := range cl.Cells {
		key := fmt.Sprintf("cluster.cells[%d]", i)
		if v.c.Line(key) == 0 {
			key = "cluster"
		}
		if n := probed[cell.Name]; n > capa.ChecksPerProber {
			v.errorf(key, "cell %s holds %d probed checks, above cluster.capacity.checks_per_prober %d: add a cell and move checks to it with cell:, or raise cluster.capacity.checks_per_prober if you measured more",
				cell.Name, n, capa.ChecksPerProber)
		}
		if n := cell.Probers * v.c.FrameEntries(); n > capa.CheckerChecksPerAggregator {
			v.errorf(key, "cell %s: %d probers × %d frame entries = %d checker-checks per push, above cluster.capacity.checker_checks_per_aggregator %d: add a cell and move probers and checks to it, or raise cluster.capacity.checker_checks_per_aggregator if you measured more",
				cell.Name, cell.Probers, v.c.FrameEntries(), n, capa.CheckerChecksPerAggregator)
		}
	}
	if cl.Edges > capa.EdgesPerAggregator {
		// Every edge takes every cell's tables, and when all but one of a
		// cell's aggregators are down, that one's server feeds them all.
		v.errorf("cluster.edges", "%d edges, above cluster.capacity.edges_per_aggregator %d: every aggregator's table goes to every edge, so a cell more does not help; raise cluster.capacity.edges_per_aggregator if you measured more (an external NATS cluster fans tables out over its servers)",
			cl.Edges, capa.EdgesPerAggregator)
	}
}
