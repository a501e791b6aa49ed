package loader

import (
	"slices"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

func TestRecordClass(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 32, 32: 32, 33: 64, 64: 64, 65: 128, 128: 128, 129: 256, 255: 256, 256: 0} {
		if got := RecordClass(n); got != want {
			t.Errorf("RecordClass(%d) = %d, want %d", n, got, want)
		}
	}
}

// wire is the wire form of a one-label name.
func wire(label string) string { return string(rune(len(label))) + label + "\x00" }

// TestSyncRecordsAtCapacity replaces every set of a full map: the sets no
// longer wanted must leave before the new ones arrive, or the kernel
// refuses the first new one.
func TestSyncRecordsAtCapacity(t *testing.T) {
	requireRoot(t)
	o, err := Load(Options{BPFFS: mountTestFS(t) + "/sd", RecordCapacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	sets := func(labels ...string) map[RecordKey]*bpf.SteadydnsRrset {
		m := map[RecordKey]*bpf.SteadydnsRrset{}
		for _, l := range labels {
			m[RecordKey{Wire: wire(l), Qtype: 1}] = &bpf.SteadydnsRrset{Ttl: 60}
		}
		return m
	}
	for _, want := range [][]string{{"a", "b"}, {"b", "c"}, {"d", "e"}} {
		if err := o.SyncRecords(sets(want...)); err != nil {
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
			t.Fatalf("maps hold %v, want %v", got, want)
		}
	}
	// The capacity holds: the check in the daemon's Build is what keeps
	// a config from reaching this.
	if err := o.SyncRecords(sets("a", "b", "c")); err == nil {
		t.Fatal("synced three sets into maps of two")
	}
}
