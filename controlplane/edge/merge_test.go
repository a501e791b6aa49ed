package edge

import (
	"bytes"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
)

// FuzzMergeTable gives an edge's merger health tables as any aggregator
// may publish them: of any cell, sender, slot and length. It never
// panics; a table of the wrong length or of an unknown cell is refused
// with nothing written; a table taken changes exactly the entries of its
// cell's checks, to the table's own, and leaves entry 0 and every other
// cell's entries as they were; and a second sender of the same cell is
// not followed while the first one is fresh, and a refused table's
// sender is not followed at all.
func FuzzMergeTable(f *testing.F) {
	const size = 8
	cfg := &config.Config{
		Cluster: config.Cluster{Cells: []config.Cell{{Name: "eu"}, {Name: "us"}}},
		Checks:  config.NewChecks([]*config.Check{{ID: "a", Cell: "eu"}, {ID: "b", Cell: "eu"}, {ID: "c", Cell: "us"}}),
	}
	index, err := health.Assign(cfg.Checks, nil, size)
	if err != nil {
		f.Fatal(err)
	}
	owned := map[string][]uint32{}
	checks := func(yield func(uint32, string) bool) {
		for k := range index.Len() {
			if !yield(index.EntryOf(k), cfg.Checks.Cell(k)) {
				return
			}
		}
	}
	for i, cell := range checks {
		owned[cell] = append(owned[cell], i)
	}
	table := func(fill byte) []byte { return bytes.Repeat([]byte{fill}, healthtable.Bytes(size)) }
	f.Add(uint8(0), "agg1", uint64(1), table(0x01), uint8(0), "agg1")
	f.Add(uint8(1), "agg2", uint64(9), table(0x00), uint8(1), "agg3")
	f.Add(uint8(2), "agg1", uint64(1), table(0x01), uint8(0), "agg2")
	f.Add(uint8(0), "agg1", uint64(1), table(0x01)[1:], uint8(0), "agg1")
	f.Fuzz(func(t *testing.T, cell uint8, sender string, slot uint64, payload []byte, cell2 uint8, sender2 string) {
		cells := []string{"eu", "us", "asia"}
		g := NewMerger(time.Minute, size)
		g.Configure(cfg.CellNames(), checks)
		now := time.Unix(1000, 0)
		type message struct {
			cell, sender string
			slot         uint64
		}
		for _, m := range []message{
			{cells[int(cell)%len(cells)], sender, slot},
			{cells[int(cell2)%len(cells)], sender2, slot + 1},
		} {
			before := bytes.Clone(g.buf)
			following := g.Following()
			var written []byte
			err := g.Take(m.cell, m.sender, m.slot, payload, now, func(table []byte, _, _ uint64) error {
				written = bytes.Clone(table)
				return nil
			})
			now = now.Add(time.Second)
			if f, ok := following[m.cell]; ok && f != m.sender {
				if written != nil || err != nil {
					t.Fatalf("table of %s/%s taken (error %v) while %s is followed", m.cell, m.sender, err, f)
				}
				continue
			}
			if _, known := owned[m.cell]; !known || len(payload) != len(before) {
				if err == nil || written != nil {
					t.Fatalf("table of cell %q, %d bytes of %d: error %v, written %v", m.cell, len(payload), len(before), err, written != nil)
				}
				if now := g.Following()[m.cell]; now != following[m.cell] {
					t.Fatalf("a refused table of %s/%s made the edge follow %q instead of %q", m.cell, m.sender, now, following[m.cell])
				}
				continue
			}
			if err != nil || written == nil {
				t.Fatalf("table of %s/%s not written: %v", m.cell, m.sender, err)
			}
			want := bytes.Clone(before)
			const stride = healthtable.Stride
			for _, i := range owned[m.cell] {
				copy(want[int(i)*stride:(int(i)+1)*stride], payload[int(i)*stride:])
			}
			if !bytes.Equal(written, want) {
				t.Fatalf("merged table\n%x\nwant\n%x", written, want)
			}
			if !healthtable.Up(written, 0) {
				t.Fatal("entry 0 is down")
			}
		}
	})
}
