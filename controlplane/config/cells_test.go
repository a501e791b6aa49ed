package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestCellsDefault: without cluster.cells there is one cell, "default",
// every check is in it, and the capacities are the defaults.
func TestCellsDefault(t *testing.T) {
	c, err := load(t, base+"health_checks:\n  h: {type: tcp, port: 22}\n")
	if err != nil {
		t.Fatal(err)
	}
	same(t, "Cells", c.Cluster.Cells, []Cell{{Name: DefaultCell}})
	same(t, "Capacity", c.Cluster.Capacity, Capacity{ChecksPerProber: 50000, CheckerChecksPerAggregator: 2621440, EdgesPerAggregator: 1600})
	same(t, "Edges", c.Cluster.Edges, 0)
	same(t, "cell of h", c.Checks.Cell(0), DefaultCell)
	same(t, "FrameEntries on one host", c.FrameEntries(), c.Aggregation.TableSize)
}

// testKey is a host's public key for configs that need one.
const testKey = "UBK5Z2K2ZUGHPGHURX26YG72RT66JGCV55NN3RBHHRPIM6HGQB2U5C3J"

// fleetConfig is base with n tcp checks in cell a and a cluster section
// with NATS and the given lines, which start at line 9 + n.
func fleetConfig(n int, cluster string) string {
	var b strings.Builder
	b.WriteString(base + "health_checks:\n")
	for i := range n {
		fmt.Fprintf(&b, "  c%d: {type: tcp, port: 22, cell: a}\n", i)
	}
	b.WriteString("cluster:\n  nats: {urls: [\"nats://198.18.64.21:4222\"], hosts: {a1: {roles: [aggregator], key: " + testKey + "}}}\n" + cluster)
	return b.String()
}

// TestCellCapacity: each limit holds at exactly its value and refuses one
// more, naming the cell, the figure, the limit and what to do.
func TestCellCapacity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		checks  int
		cluster string
		err     string
	}{
		{"checks at the limit", 3, "  cells: [{name: a, probers: 1, aggregators: 1}]\n  capacity: {checks_per_prober: 3}\n", ""},
		{"checks over", 4, "  cells: [{name: a, probers: 1, aggregators: 1}]\n  capacity: {checks_per_prober: 3}\n",
			"config.yaml:13: cluster.cells[0]: cell a holds 4 probed checks, above cluster.capacity.checks_per_prober 3: add a cell and move checks to it with cell:, or raise cluster.capacity.checks_per_prober if you measured more"},
		{"checker-checks at the limit", 1, "  cells: [{name: a, probers: 4, aggregators: 1}]\n  capacity: {checks_per_prober: 3, checker_checks_per_aggregator: 12}\n", ""},
		{"checker-checks over", 1, "  cells: [{name: a, probers: 5, aggregators: 1}]\n  capacity: {checks_per_prober: 3, checker_checks_per_aggregator: 12}\n",
			"config.yaml:10: cluster.cells[0]: cell a: 5 probers × 3 frame entries = 15 checker-checks per push, above cluster.capacity.checker_checks_per_aggregator 12: add a cell and move probers and checks to it, or raise cluster.capacity.checker_checks_per_aggregator if you measured more"},
		{"edges at the limit", 1, "  cells: [{name: a, probers: 1, aggregators: 1}]\n  capacity: {edges_per_aggregator: 7}\n  edges: 7\n", ""},
		{"edges over", 1, "  cells: [{name: a, probers: 1, aggregators: 1}]\n  capacity: {edges_per_aggregator: 7}\n  edges: 8\n",
			"config.yaml:12: cluster.edges: 8 edges, above cluster.capacity.edges_per_aggregator 7: every aggregator's table goes to every edge, so a cell more does not help; raise cluster.capacity.edges_per_aggregator if you measured more (an external NATS cluster fans tables out over its servers)"},
		{"a second cell takes the checks", 4, "  cells: [{name: a, probers: 1, aggregators: 1}, {name: b, probers: 1, aggregators: 1}]\n  capacity: {checks_per_prober: 3}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fleetConfig(tc.checks, tc.cluster)
			if tc.name == "a second cell takes the checks" {
				cfg = strings.Replace(cfg, "c3: {type: tcp, port: 22, cell: a}", "c3: {type: tcp, port: 22, cell: b}", 1)
			}
			c, err := load(t, cfg)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Fatalf("got %v\nwant %s", err, tc.err)
			case tc.err == "" && c.FrameEntries() != min(c.Cluster.Capacity.ChecksPerProber, c.Aggregation.TableSize):
				t.Errorf("frame entries %d, want the prober's capacity %d", c.FrameEntries(), c.Cluster.Capacity.ChecksPerProber)
			}
		})
	}
}

// TestCellCapacityOneHost: without cluster.nats one process plays every
// role, so no cell can overfill.
func TestCellCapacityOneHost(t *testing.T) {
	var b strings.Builder
	b.WriteString(base + "health_checks:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  c%d: {type: tcp, port: 22}\n", i)
	}
	b.WriteString("cluster:\n  capacity: {checks_per_prober: 3}\n  edges: 9\n")
	if _, err := load(t, b.String()); err != nil {
		t.Fatal(err)
	}
}

func TestCellErrors(t *testing.T) {
	cells := "cluster:\n  cells:\n    - {name: a, probers: 1, aggregators: 1}\n    - {name: b, probers: 2, aggregators: 2}\n"
	for _, tc := range []struct {
		name, config, err string
	}{
		{"unknown cell", base + "health_checks:\n  h: {type: tcp, port: 22, cell: c}\n" + cells,
			`config.yaml:7: health_checks.h.cell: unknown cell "c": define it under cluster.cells`},
		{"child in another cell", base + "health_checks:\n  h: {type: tcp, port: 22, cell: b}\n  k: {type: calculated, children: [h]}\n" + cells,
			`config.yaml:8: health_checks.k.children[0]: h is in cell "b", k in cell "a": a calculated check's children must be in its cell`},
		{"name", base + "cluster:\n  cells: [{name: a.b, probers: 1, aggregators: 1}]\n",
			`config.yaml:7: cluster.cells[0].name: cell name "a.b": want 1 to 32 letters, digits, '_' or '-'`},
		{"duplicate", base + "cluster:\n  cells:\n    - {name: a, probers: 1, aggregators: 1}\n    - {name: a, probers: 1, aggregators: 1}\n",
			`config.yaml:9: cluster.cells[1].name: duplicate cell "a", first at line 8`},
		{"no probers", base + "cluster:\n  cells: [{name: a, aggregators: 1}]\n",
			`config.yaml:7: cluster.cells[0].probers: want at least 1 (how many prober hosts the cell runs), got 0`},
		{"empty list", base + "cluster:\n  cells: []\n", `config.yaml:7: cluster.cells: at least one cell is required`},
		{"capacity", base + "cluster:\n  capacity: {checks_per_prober: 0}\n", `config.yaml:7: cluster.capacity.checks_per_prober: want at least 1, got 0`},
		{"unknown key", base + "cluster:\n  cells: [{name: a, probers: 1, aggregators: 1, edges: 2}]\n", `config.yaml:7: cluster.cells[0].edges: unknown key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.config)
			if err == nil || err.Error() != tc.err {
				t.Fatalf("got %v\nwant %s", err, tc.err)
			}
		})
	}
}

// TestCellFirstIsDefault: a check without cell: is in the first cell, and
// a check's cell is part of the config hash.
func TestCellFirstIsDefault(t *testing.T) {
	cells := "cluster:\n  cells:\n    - {name: blue, probers: 1, aggregators: 1}\n    - {name: red, probers: 1, aggregators: 1}\n"
	c, err := load(t, base+"health_checks:\n  h: {type: tcp, port: 22}\n"+cells)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "cell of h", c.Checks.Cell(0), "blue")
	same(t, "CellNames", c.CellNames(), []string{"blue", "red"})
	moved, err := load(t, base+"health_checks:\n  h: {type: tcp, port: 22, cell: red}\n"+cells)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Hash == c.Hash {
		t.Error("moving a check to another cell kept the config hash")
	}
}
