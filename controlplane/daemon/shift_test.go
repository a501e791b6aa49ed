package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// shiftCells is two cells, web1 in a and web2 in b, with answers of both
// in region r1 and one without a check in r2.
func shiftCells(t *testing.T) *Plan {
	t.Helper()
	cfg := &config.Config{
		Server:      config.Server{Geo: &config.Geo{Regions: []config.Region{{Name: "r1"}, {Name: "r2"}}}},
		Aggregation: config.Aggregation{TableSize: 64},
		Cluster:     config.Cluster{Cells: []config.Cell{{Name: "a"}, {Name: "b"}}},
		Checks:      config.NewChecks([]*config.Check{{ID: "web1", Type: config.CheckTCP, Cell: "a"}, {ID: "web2", Type: config.CheckTCP, Cell: "b"}}),
		Records: []config.Record{{Answers: []config.Answer{
			{Check: "web1", Region: "r1"}, {Check: "web2", Region: "r1"}, {Region: "r2"}}}},
	}
	x, err := health.AssignConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Plan{Config: cfg, Index: x}
}

// TestDerivedEntryCells: an edge takes a derived entry from the cell of
// its check, whose aggregators know the check's state, and one without a
// check from the first cell.
func TestDerivedEntryCells(t *testing.T) {
	p := shiftCells(t)
	got := map[uint32]string{}
	for i, cell := range p.entryCells() {
		got[i] = cell
	}
	for _, c := range []struct{ check, region, cell string }{
		{"web1", "", "a"}, {"web2", "", "b"}, {"web1", "r1", "a"}, {"web2", "r1", "b"}, {"", "r2", "a"},
	} {
		i, ok := p.Index.AnswerEntry(c.check, c.region)
		if !ok || got[i] != c.cell {
			t.Errorf("%q in %q: entry %d (%v) from cell %q, want %q", c.check, c.region, i, ok, got[i], c.cell)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d entries taken from cells, want 5: %v", len(got), got)
	}
}

// TestShiftChange: what a shift sends, and what is refused before it is.
func TestShiftChange(t *testing.T) {
	cfg := shiftCells(t).Config
	for _, c := range []struct {
		name, region, reason string
		d                    time.Duration
		want                 transport.StateChange
		err                  string
	}{
		{name: "shift", region: "r1", reason: "INC-7", d: 30*time.Minute + time.Microsecond,
			want: transport.StateChange{Kind: transport.StateShift, Value: 1, Check: "r1", Reason: "INC-7", Duration: 30 * time.Minute}},
		{name: "cancel", region: "r1", want: transport.StateChange{Kind: transport.StateShift, Check: "r1"}},
		{name: "unknown region", region: "r9", reason: "x", d: time.Minute, err: "shifting r9 away: no such region in server.geo.regions"},
		{name: "cancel in an unknown region", region: "r9", err: "cancelling the shift of r9: no such region in server.geo.regions"},
		{name: "too long", region: "r1", reason: "x", d: 73 * time.Hour, err: "shifting r1 away: duration 73h0m0s is outside 1s to 72h0m0s"},
		{name: "no reason", region: "r1", d: time.Minute, err: "shifting r1 away: a reason is required: it shows in the events and in status"},
	} {
		got, err := shiftChange(cfg, c.region, c.d, c.reason)
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v (%v), want %+v", c.name, got, err, c.want)
		}
	}
	// A region's name and a reason that fit the API's bounds but not
	// the state message are refused before anything is sent.
	long := strings.Repeat("r", 20)
	cfg.Server.Geo.Regions = append(cfg.Server.Geo.Regions, config.Region{Name: long})
	if _, err := shiftChange(cfg, long, time.Minute, strings.Repeat("x", health.MaxShiftReason)); err == nil ||
		err.Error() != "shifting "+long+" away: the region's name and the reason hold 84 bytes, at most 80" {
		t.Errorf("a region and reason longer than a message: %v", err)
	}
}
