package health_test

import (
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/prober"
)

// FuzzIngestFrame gives the aggregator arbitrary result frames, as any
// checker of the cell may send them. It never panics; a frame is either
// applied or rejected, and counted as one or the other; an entry whose
// index is past the table changes nothing; and the table pushed after it
// keeps entry 0, which candidates without a check read, up. Frames come
// from host p1: one that names another prober is rejected, and every
// result more than a push period ahead of the clock is refused.
func FuzzIngestFrame(f *testing.F) {
	ids := []string{"a", "b", "c"}
	cfg := &config.Config{Checks: checksOf(ids, map[string]*config.Check{"a": tcp(1, 1), "b": tcp(2, 2), "c": tcp(1, 3)}), Hash: 0x5eed,
		Aggregation: config.Aggregation{PushInterval: time.Second, Quorum: 0.5, StaleAfter: 10 * time.Second, TableSize: tableSize,
			CheckerTimeout: 3 * time.Second}}
	index := map[string]uint32{"a": 1, "b": 2, "c": 3}
	idx := health.IndexAt(cfg.Checks, index, tableSize)
	for _, fr := range []prober.Frame{
		{Version: 1, ConfigHash: 0x5eed, Prober: "p1", Region: "eu", Entries: []prober.Entry{{Index: 1, Seq: 1, Healthy: true}, {Index: 2, Seq: 5, Reason: prober.ReasonTimeout}}},
		{Version: 2, ConfigHash: 0x5eed, Prober: "p2", Entries: make([]prober.Entry, tableSize)},
		{Version: 3, ConfigHash: 0x5eed, Prober: "p3", Entries: []prober.Entry{{Index: tableSize + 1, Seq: 1}, {Index: 0, Seq: 1}, {Index: 1<<32 - 1, Seq: 1}}},
		{Version: 4, ConfigHash: 0xbad, Prober: "p1", Entries: []prober.Entry{{Index: 1, Seq: 2}}},
	} {
		b, err := prober.Encode(nil, &fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sink := &memSink{}
		a, err := health.New(cfg, idx, sink, health.Seed{}, &health.EventLog{})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1000, 0)
		ingestErr := a.IngestFrameFrom("p1", "", b, now)
		var fr prober.Frame
		decodeErr := prober.Decode(b, &fr)
		if wantErr := decodeErr != nil || fr.ConfigHash != cfg.Hash || fr.Prober != "p1"; (ingestErr != nil) != wantErr {
			t.Fatalf("ingest error %v; decode error %v, hash %#x", ingestErr, decodeErr, fr.ConfigHash)
		}
		c := a.Counters()
		if c.Frames+c.Rejected != 1 || (c.Rejected == 1) != (ingestErr != nil) {
			t.Fatalf("one frame counted as %d applied and %d rejected (error %v)", c.Frames, c.Rejected, ingestErr)
		}
		future := uint64(0)
		for _, e := range fr.Entries {
			if ingestErr == nil && e.Seq > uint64(now.Add(cfg.Aggregation.PushInterval).UnixMilli()) {
				future++
			}
		}
		if c.Future != future {
			t.Fatalf("%d results from the future refused, want %d", c.Future, future)
		}
		if err := a.Push(now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if len(sink.table) != healthtable.Bytes(tableSize) || !healthtable.Up(sink.table, 0) {
			t.Fatalf("pushed a table of %d bytes with entry 0 up %v", len(sink.table), healthtable.Up(sink.table, 0))
		}
		for _, s := range a.Statuses() {
			if s.Index != index[s.ID] {
				t.Fatalf("check %s moved to entry %d", s.ID, s.Index)
			}
		}
	})
}
