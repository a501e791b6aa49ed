package daemon

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
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
	plan := &Plan{Config: cfg, Index: index}
	owned := map[string][]uint32{}
	for k := range index.Len() {
		cell := cfg.Checks.Cell(k)
		owned[cell] = append(owned[cell], index.EntryOf(k))
	}
	table := func(fill byte) []byte { return bytes.Repeat([]byte{fill}, healthtable.Bytes(size)) }
	f.Add(uint8(0), "agg1", uint64(1), table(0x01), uint8(0), "agg1")
	f.Add(uint8(1), "agg2", uint64(9), table(0x00), uint8(1), "agg3")
	f.Add(uint8(2), "agg1", uint64(1), table(0x01), uint8(0), "agg2")
	f.Add(uint8(0), "agg1", uint64(1), table(0x01)[1:], uint8(0), "agg1")
	f.Fuzz(func(t *testing.T, cell uint8, sender string, slot uint64, payload []byte, cell2 uint8, sender2 string) {
		cells := []string{"eu", "us", "asia"}
		g := newMerger(time.Minute, size)
		g.configure(plan)
		now := time.Unix(1000, 0)
		for _, m := range []transport.Message{
			{Kind: transport.KindTable, Cell: cells[int(cell)%len(cells)], Sender: sender, Slot: slot, Payload: payload},
			{Kind: transport.KindTable, Cell: cells[int(cell2)%len(cells)], Sender: sender2, Slot: slot + 1, Payload: payload},
		} {
			before := bytes.Clone(g.buf)
			following := g.following()
			var written []byte
			err := g.take(m, now, func(table []byte, _, _ uint64) error {
				written = bytes.Clone(table)
				return nil
			})
			now = now.Add(time.Second)
			if f, ok := following[m.Cell]; ok && f != m.Sender {
				if written != nil || err != nil {
					t.Fatalf("table of %s/%s taken (error %v) while %s is followed", m.Cell, m.Sender, err, f)
				}
				continue
			}
			if _, known := owned[m.Cell]; !known || len(payload) != len(before) {
				if err == nil || written != nil {
					t.Fatalf("table of cell %q, %d bytes of %d: error %v, written %v", m.Cell, len(payload), len(before), err, written != nil)
				}
				if now := g.following()[m.Cell]; now != following[m.Cell] {
					t.Fatalf("a refused table of %s/%s made the edge follow %q instead of %q", m.Cell, m.Sender, now, following[m.Cell])
				}
				continue
			}
			if err != nil || written == nil {
				t.Fatalf("table of %s/%s not written: %v", m.Cell, m.Sender, err)
			}
			want := bytes.Clone(before)
			for _, i := range owned[m.Cell] {
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

// FuzzDecodeState gives the state-change decoder arbitrary messages. It
// never panics, and a message it accepts encodes back to one that
// decodes the same.
func FuzzDecodeState(f *testing.F) {
	for _, c := range []struct {
		kind, v uint8
		id      string
	}{{stateAdmin, 2, "web1"}, {stateExt, 1, "deploy"}, {stateAdmin, 0, string(make([]byte, maxStateID))}} {
		b, err := encodeState(c.kind, c.v, c.id)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(make([]byte, stateSize-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, v, id, err := decodeState(b)
		if err != nil {
			return
		}
		again, err := encodeState(kind, v, id)
		if err != nil {
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		k2, v2, id2, err := decodeState(again)
		if err != nil || !reflect.DeepEqual([]any{k2, v2, id2}, []any{kind, v, id}) {
			t.Fatalf("decoded %d %d %q, re-encoded and decoded %d %d %q (%v)", kind, v, id, k2, v2, id2, err)
		}
	})
}
