package loader

import (
	"testing"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/healthtable"
)

// TestHealthTable writes entries through the table buffer and reads them
// back as the kernel holds them: through a map lookup, which knows the
// entry layout and stride without this package's help, and through the
// memory mapping the program reads.
func TestHealthTable(t *testing.T) {
	requireRoot(t)
	o, err := Load(Options{BPFFS: mountTestFS(t) + "/sd", HealthCapacity: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	type entry struct {
		up     bool
		reason uint8
	}
	set := map[uint32]entry{
		0:    {true, uint8(bpf.SteadydnsHealthReasonREASON_STATIC)},
		1:    {true, 1},
		2:    {false, 2},
		513:  {false, uint8(bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN)},
		1023: {true, uint8(bpf.SteadydnsHealthReasonREASON_EXTERNAL)},
	}
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	for i, e := range set {
		healthtable.Put(table, i, e.up, e.reason)
	}
	meta, err := o.PushHealth(table, 7, 0xfeed, 5e9)
	if err != nil {
		t.Fatal(err)
	}
	var inMap bpf.SteadydnsTableMeta
	if err := o.HealthMeta.Lookup(uint32(0), &inMap); err != nil {
		t.Fatal(err)
	}
	if meta != inMap || meta.Version != 7 || meta.ConfigHash != 0xfeed || meta.StaleAfterNs != 5e9 || meta.ArrivedNs == 0 {
		t.Errorf("PushHealth returned %+v, the map holds %+v", meta, inMap)
	}

	back := make([]byte, len(table))
	if _, err := o.ReadHealth(back); err != nil {
		t.Fatal(err)
	}
	for i := range uint32(o.HealthCapacity()) {
		want := set[i] // unset entries are down with reason 0
		var e bpf.SteadydnsHealthEntry
		if err := o.Health.Lookup(i, &e); err != nil {
			t.Fatal(err)
		}
		state := bpf.SteadydnsHealthStateHEALTH_DOWN
		if want.up {
			state = bpf.SteadydnsHealthStateHEALTH_UP
		}
		if e != (bpf.SteadydnsHealthEntry{State: state, Reason: want.reason}) {
			t.Errorf("entry %d in the map is %+v, want up=%v reason %d", i, e, want.up, want.reason)
		}
		if got := o.HealthUpAt(i); got != want.up {
			t.Errorf("HealthUpAt(%d) = %v, want %v", i, got, want.up)
		}
		if got, r := healthtable.Up(back, i), healthtable.Reason(back, i); got != want.up || r != want.reason {
			t.Errorf("entry %d read back up=%v reason %d, want up=%v reason %d", i, got, r, want.up, want.reason)
		}
	}
	if healthtable.Up(back, 1024) || healthtable.Reason(back, 1024) != 0 || o.HealthUpAt(1024) {
		t.Error("an entry past the table reads as set")
	}
}

// BenchmarkPushHealth is the aggregator's constant work on the loader's
// side: encoding every entry of a 65,536-entry table and writing it.
func BenchmarkPushHealth(b *testing.B) {
	requireRoot(b)
	o, err := Load(Options{BPFFS: mountTestFS(b) + "/sd", HealthCapacity: 65536})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	n := uint32(o.HealthCapacity())
	for k := range b.N {
		for i := range n {
			healthtable.Put(table, i, (i+uint32(k))%3 != 0, uint8(i))
		}
		if _, err := o.PushHealth(table, uint64(k+1), 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}
