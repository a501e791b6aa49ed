package loader

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

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
		{0, DefaultRecordCapacity, 81920}, // the default of server.max_records
		{4096, 4096, 5120},
		{5000, 5000, 6250},
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

// TestLoadProgram loads the program again with rate limiting on, onto the
// maps of a load without it: the new program must use the first load's
// maps, start the shared clock, and be refused for another layout.
func TestLoadProgram(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t)
	opts := Options{BPFFS: dir + "/sd", HealthCapacity: 1024, Servers: []netip.Addr{netip.MustParseAddr("198.18.0.2")}}
	o, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	clock := func() uint64 {
		var c bpf.SteadydnsRrlClock
		if err := o.RrlClock.Lookup(uint32(0), &c); err != nil {
			t.Fatal(err)
		}
		return c.Now
	}
	if now := clock(); now != 0 {
		t.Fatalf("the rrl clock reads %d without rate limiting, want it not started", now)
	}

	on := opts
	on.RRL = RRL{Rate: 100, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}
	p, err := o.LoadProgram(on)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	usesMaps(t, p, "the program loaded again", o.Rrl, o.Records, o.Counters, o.HealthBits)
	first := clock()
	time.Sleep(20 * time.Millisecond)
	if now := clock(); first == 0 || now <= first {
		t.Errorf("the rrl clock read %d, then %d 20ms later: the program loaded with rate limiting did not start it", first, now)
	}

	other := opts
	other.HealthCapacity = 2048
	if p, err := o.LoadProgram(other); err == nil {
		p.Close()
		t.Error("a program of another layout (health capacity 2048, not 1024) loaded onto the first load's maps")
	}
	if err := o.SwapProgram("sdtest0", p); err == nil {
		t.Error("swapped a program onto a link that was never attached")
	}
}

// TestLoadProgramFrom loads another build's object, here this build's own
// from the repository, onto the maps of a load: it must use them; a
// missing object and one of another layout are refused.
func TestLoadProgramFrom(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t)
	opts := Options{BPFFS: dir + "/sd", HealthCapacity: 1024, Servers: []netip.Addr{netip.MustParseAddr("198.18.0.2")}}
	o, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	object := filepath.Join("..", "bpf", "steadydns_bpfel.o")
	p, err := o.LoadProgramFrom(opts, object)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	usesMaps(t, p, "the other build's program", o.Records, o.RecExts, o.Counters, o.HealthBits)
	if _, err := o.LoadProgramFrom(opts, filepath.Join(t.TempDir(), "none.o")); err == nil || !strings.Contains(err.Error(), "none.o") {
		t.Errorf("loading a missing object: %v, want an error naming it", err)
	}
	other := opts
	other.HealthCapacity = 2048
	if p, err := o.LoadProgramFrom(other, object); err == nil {
		p.Close()
		t.Error("an object of another layout (health capacity 2048, not 1024) loaded onto the first load's maps")
	}
}

// usesMaps requires program p, described by what, to use each of maps.
func usesMaps(t *testing.T, p *ebpf.Program, what string, maps ...*ebpf.Map) {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := info.MapIDs()
	for _, m := range maps {
		mi, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := mi.ID()
		if !slices.Contains(ids, id) {
			t.Errorf("%s does not use the first load's %s map (id %d; it uses %v)", what, mi.Name, id, ids)
		}
	}
}
