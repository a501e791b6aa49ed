package loader

import (
	"net/netip"
	"os"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("loading bpf programs needs root (running as uid %d)", os.Geteuid())
	}
}

func TestLoadPinsAndReuses(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t)
	opts := Options{BPFFS: dir + "/sd", HealthCapacity: 1024, Servers: []netip.Addr{netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("fd53::2")}}
	o, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if got := o.Health.MaxEntries(); got != 1024 {
		t.Fatalf("health capacity %d, want 1024", got)
	}
	if err := o.Counters.Update(uint32(0), make([][bpf.SteadydnsOutcomeOUT_MAX]uint64, mustCPUs(t)), 0); err != nil {
		t.Fatal(err)
	}
}

func TestRecordCapacity(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t)
	for _, tt := range []struct {
		capacity, want, slots uint32
	}{
		{0, DefaultRecordCapacity, 1 << 17}, // the default of server.max_records
		{4096, 4096, 8192},
		{5000, 5000, 16384},
	} {
		o, err := Load(Options{BPFFS: dir + "/sd", RecordCapacity: tt.capacity})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if got := o.Records.MaxEntries(); got != tt.slots {
			t.Errorf("RecordCapacity %d: the table has %d slots, want %d", tt.capacity, got, tt.slots)
		}
		if got := o.RecordCapacity(); got != int(tt.want) {
			t.Errorf("RecordCapacity %d: holds %d sets, want %d", tt.capacity, got, tt.want)
		}
	}
}
