package loader

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

// wire is the wire form of a one-label name.
func wire(label string) string { return string(rune(len(label))) + label + "\x00" }

// TestSyncRecordsAtCapacity replaces every set of a full table: the sets no
// longer wanted must leave before the new ones arrive, or the table
// refuses the first new one.
func TestSyncRecordsAtCapacity(t *testing.T) {
	requireRoot(t)
	o, err := Load(Options{BPFFS: mountTestFS(t) + "/sd", RecordCapacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	sets := func(labels ...string) map[RecordKey]*bpf.Set {
		m := map[RecordKey]*bpf.Set{}
		for _, l := range labels {
			m[RecordKey{Wire: wire(l), Qtype: 1}] = &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60}}
		}
		return m
	}
	for _, want := range [][]string{{"a", "b"}, {"b", "c"}, {"d", "e"}} {
		if err := o.SyncRecords(maps.All(sets(want...))); err != nil {
			t.Fatalf("syncing %v: %v", want, err)
		}
		keys, err := o.RecordKeys()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range keys {
			got = append(got, k.Wire[1:len(k.Wire)-1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("table holds %v, want %v", got, want)
		}
	}
	// The capacity holds: the check in the daemon's Build is what keeps
	// a config from reaching this.
	if err := o.SyncRecords(maps.All(sets("a", "b", "c"))); err == nil {
		t.Fatal("synced three sets into a table of two")
	}
}

// probe finds k in the mapped table as probe_slot and find_slot in
// bpf/table.h do: from its home slot, at most PROBE_MAX slots, stopping at
// an empty slot or one nearer its home than the probe has come, and
// comparing the name where the hash and type match. It fails the test
// when a slot's dist is not its distance from its home, which would stop
// the program short.
func probe(t *testing.T, o *Objects, k RecordKey) (*bpf.SteadydnsRecSlot, bool) {
	t.Helper()
	tb := o.records
	h := NameHash(k.Wire, k.Qtype)
	j := tb.home(h)
	for i := range uint8(probeMax) {
		s := tb.slot(j)
		if s.State != uint8(bpf.SteadydnsSlotStateSLOT_USED) {
			return nil, false
		}
		if at := (homeSlot(s.Hash, tb.size) + uint32(s.Dist)) % tb.size; at != j {
			t.Fatalf("slot %d: dist %d from home %d puts it at %d", j, s.Dist, homeSlot(s.Hash, tb.size), at)
		}
		if s.Dist < i {
			return nil, false
		}
		if s.Hash == h && s.Qtype == k.Qtype {
			return s, tb.slotName(s) == k.Wire
		}
		j = tb.next(j)
	}
	return nil, false
}

// TestRecordTableChurn fills a table to its capacity, deletes and adds
// sets at random, and after each step finds every set as the program
// would, with its own value, but the few spilled past PROBE_MAX, and no
// set that was removed; a set past the capacity is refused. A second
// Load on the same pins reads the sets placed back from the table.
func TestRecordTableChurn(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t) + "/sd"
	const capacity = 4096
	o, err := Load(Options{BPFFS: dir, RecordCapacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[RecordKey]uint32{}
	next := 0
	add := func() {
		k := RecordKey{Wire: wire(fmt.Sprintf("n%d", next)), Qtype: []uint16{1, 28}[next%2]}
		next++
		if err := o.PutRecord(k, &bpf.SteadydnsRrset{Ttl: uint32(next)}); err != nil {
			t.Fatal(err)
		}
		want[k] = uint32(next)
	}
	check := func(step string) {
		t.Helper()
		// A set spilled, past PROBE_MAX, is the fallback's: a few at
		// the table's fullest.
		spilled := 0
		for k, ttl := range want {
			if _, ok := o.records.spilled[k]; ok {
				spilled++
				continue
			}
			s, ok := probe(t, o, k)
			if !ok || s.Rr.Ttl != ttl {
				t.Fatalf("%s: %q/%d not found within %d slots of home (found %v)", step, k.Wire, k.Qtype, probeMax, ok)
			}
			// The loader finds it where the program does.
			if j, ok := o.records.find(k); !ok || o.records.slot(j) != s {
				t.Fatalf("%s: the loader finds %q/%d at %d (%v), not where the program does", step, k.Wire, k.Qtype, j, ok)
			}
		}
		if used := len(o.records.keys()) - len(o.records.spilled); o.records.n != used {
			t.Fatalf("%s: %d sets counted, %d placed", step, o.records.n, used)
		}
		if spilled > len(want)/100 || o.RecordsSpilled() != spilled {
			t.Fatalf("%s: %d of %d sets spilled (%d counted), want at most 1%%", step, spilled, len(want), o.RecordsSpilled())
		}
		keys, _ := o.RecordKeys()
		if len(keys) != len(want) {
			t.Fatalf("%s: %d keys listed, want %d", step, len(keys), len(want))
		}
	}
	for range capacity {
		add()
	}
	check("filled")
	for round := range 4 {
		var gone []RecordKey
		for k := range want {
			if rng.IntN(3) == 0 {
				gone = append(gone, k)
			}
		}
		for _, k := range gone {
			if err := o.DeleteRecord(k); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
			if _, ok := probe(t, o, k); ok {
				t.Fatalf("round %d: %q/%d found after its deletion", round, k.Wire, k.Qtype)
			}
		}
		check(fmt.Sprintf("round %d, deleted", round))
		for len(want) < capacity {
			add()
		}
		check(fmt.Sprintf("round %d, refilled", round))
	}
	if err := o.PutRecord(RecordKey{Wire: wire("over"), Qtype: 1}, &bpf.SteadydnsRrset{}); err == nil {
		t.Error("a set past the capacity was written")
	}

	again, err := Load(Options{BPFFS: dir, RecordCapacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	// A restart reads back the sets placed; the next sync places the
	// spilled again.
	keys, _ := again.RecordKeys()
	if len(keys) != len(want)-o.RecordsSpilled() {
		t.Fatalf("reloaded: %d keys, want %d less %d spilled", len(keys), len(want), o.RecordsSpilled())
	}
	for _, k := range keys {
		if _, ok := want[k]; !ok {
			t.Fatalf("reloaded: %q/%d, which is not in the table", k.Wire, k.Qtype)
		}
	}
}

// TestRecordTableLiveRegion syncs a zone that grows and then shrinks: the
// sets sit in a region sized to hold them at 70%, which rec_size tells the
// program, every set is found there as the program probes, the slots past
// the region are empty, and a second Load on the same pins reads the same
// region and sets back.
func TestRecordTableLiveRegion(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t) + "/sd"
	const capacity = 4096
	o, err := Load(Options{BPFFS: dir, RecordCapacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	sets := func(n int) map[RecordKey]*bpf.Set {
		m := map[RecordKey]*bpf.Set{}
		for i := range n {
			m[RecordKey{Wire: wire(fmt.Sprintf("n%d", i)), Qtype: 1}] = &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: uint32(i + 1)}}
		}
		return m
	}
	check := func(o *Objects, n int, size uint32) {
		t.Helper()
		var live uint32
		if err := o.RecSize.Lookup(uint32(0), &live); err != nil {
			t.Fatal(err)
		}
		if live != size || o.records.size != size {
			t.Fatalf("%d sets: rec_size %d, the loader's %d, want %d", n, live, o.records.size, size)
		}
		for k, v := range sets(n) {
			if s, ok := probe(t, o, k); !ok || s.Rr.Ttl != v.Ttl {
				t.Fatalf("%d sets: %q not found in the live region", n, k.Wire)
			}
		}
		for j := size; j < uint32(len(o.records.heads)); j++ {
			if o.records.slot(j).State != uint8(bpf.SteadydnsSlotStateSLOT_EMPTY) {
				t.Fatalf("%d sets: slot %d past the live region is in use", n, j)
			}
		}
	}
	// The region grows past 80% full to hold the sets at 70%, and
	// shrinks below a third full, never below 1,024 slots.
	for _, c := range []struct {
		n    int
		size uint32
	}{{0, 1024}, {300, 1024}, {900, 1286}, {3000, 4286}, {1500, 4286}, {1000, 1429}, {100, 1024}} {
		if err := o.SyncRecords(maps.All(sets(c.n))); err != nil {
			t.Fatal(err)
		}
		check(o, c.n, c.size)
		if _, ok := probe(t, o, RecordKey{Wire: wire(fmt.Sprintf("n%d", c.n)), Qtype: 1}); ok {
			t.Fatalf("%d sets: a removed set is still found", c.n)
		}
	}
	o2, err := Load(Options{BPFFS: dir, RecordCapacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	check(o2, 100, 1024)
}

// TestSyncRecordsWritesChanged reloads a table with 1% of its sets changed:
// only those slots may be written, and a reload changing nothing writes
// none.
func TestSyncRecordsWritesChanged(t *testing.T) {
	requireRoot(t)
	o, err := Load(Options{BPFFS: mountTestFS(t) + "/sd", RecordCapacity: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	const n = 10_000
	sets := map[RecordKey]*bpf.Set{}
	for i := range n {
		sets[RecordKey{Wire: wire(fmt.Sprintf("n%d", i)), Qtype: 1}] = &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, N: 1}}
	}
	sync := func(what string) uint64 {
		t.Helper()
		before := o.RecordWrites()
		if err := o.SyncRecords(maps.All(sets)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return o.RecordWrites() - before
	}
	// A first load also moves sets a newer one displaces (Robin Hood).
	if got := sync("the first load"); got < n {
		t.Errorf("the first load: %d slots written, want at least %d", got, n)
	}
	if got := sync("the same sets again"); got != 0 {
		t.Errorf("the same sets again: %d slots written, want none", got)
	}
	for i := 0; i < n; i += 100 {
		sets[RecordKey{Wire: wire(fmt.Sprintf("n%d", i)), Qtype: 1}] = &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 61, N: 1}}
	}
	if got := sync("1% of the sets changed"); got != n/100 {
		t.Errorf("1%% of the sets changed: %d slots written, want %d", got, n/100)
	}
}

// TestPutGrowsByDoubling adds sets one by one: the region grows to twice
// its sets each time, so each set is moved a few times in all, not once
// for every tenth more.
func TestPutGrowsByDoubling(t *testing.T) {
	requireRoot(t)
	o, err := Load(Options{BPFFS: mountTestFS(t) + "/sd", RecordCapacity: 40_000})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	const n = 20_000
	for i := range n {
		if err := o.PutRecord(RecordKey{Wire: wire(fmt.Sprintf("n%d", i)), Qtype: 1}, &bpf.SteadydnsRrset{Ttl: 60, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if w := o.RecordWrites(); w > 4*n {
		t.Errorf("%d sets added one by one: %d slots written, want at most %d", n, w, 4*n)
	}
	if o.RecordsSpilled() != 0 {
		t.Errorf("%d sets spilled from a region at most 80%% full", o.RecordsSpilled())
	}
}
