package bpf_test

import (
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/geo"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/internal/xdptest"
	"github.com/steadydns/steadydns/loader"
)

// The shared fixtures under the names these tests use.
var (
	server4, server6, client4, client6 = xdptest.Server4, xdptest.Server6, xdptest.Client4, xdptest.Client6
	srvMAC, cliMAC                     = xdptest.ServerMAC, xdptest.ClientMAC

	wire       = xdptest.Wire
	query      = xdptest.Query
	frame      = xdptest.Frame
	runProgram = xdptest.Run
)

// load loads the program into a private bpffs so tests never touch the
// pins of a running server.
func load(t testing.TB) *loader.Objects {
	t.Helper()
	return loadWith(t, loader.Options{})
}

// loadWith is load with opts, whose pin directory, health capacity and
// server addresses xdptest.Load sets.
func loadWith(t testing.TB, opts loader.Options) *loader.Objects {
	t.Helper()
	return xdptest.Load(t, opts)
}

// testHealth is the health table's capacity in loadWith.
const testHealth = xdptest.HealthCapacity

// loadAgain loads o's program once more, with rrl's rate limiting, onto
// the maps of o, a load of loadWith's with rrl's table size. Each load
// is compiled anew, and the kernel puts each function of the image at a
// random offset within a 64-byte block, which moves a load's speed as
// much as a small change would, so a benchmark comparing programs gives
// every round loads of its own.
func loadAgain(t testing.TB, o *loader.Objects, rrl loader.RRL) *ebpf.Program {
	t.Helper()
	p, err := o.LoadProgram(loader.Options{HealthCapacity: testHealth, ExtCapacity: xdptest.ExtCapacity, Servers: []netip.Addr{server4, server6}, RRL: rrl})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type cand struct {
	addr   string
	check  uint32
	backup bool
	prio   uint8
	weight uint8
}

func rrset(ttl uint32, maxAnswers uint8, cs ...cand) *bpf.SteadydnsRrset {
	v := &bpf.SteadydnsRrset{Ttl: ttl, N: uint8(len(cs)), MaxAnswers: maxAnswers}
	for i, c := range cs {
		a := netip.MustParseAddr(c.addr)
		if a.Is4() {
			b := a.As4()
			copy(v.Cand[i].Addr[:], b[:])
		} else {
			v.Cand[i].Addr = a.As16()
		}
		v.Cand[i].Check = c.check
		v.Cand[i].Priority = c.prio
		v.Cand[i].Weight = c.weight
		if c.backup {
			v.Cand[i].Flags = uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP)
		}
	}
	return v
}

func put(t testing.TB, o *loader.Objects, name string, qtype uint16, v *bpf.SteadydnsRrset) {
	t.Helper()
	if err := o.PutRecord(loader.RecordKey{Wire: wire(t, name), Qtype: qtype}, v); err != nil {
		t.Fatal(err)
	}
}

// setHealth writes a table (version 1) in which the listed entries are up.
func setHealth(t testing.TB, o *loader.Objects, up ...uint32) {
	t.Helper()
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	healthtable.Put(table, 0, true, 0)
	for _, i := range up {
		healthtable.Put(table, i, true, 0)
	}
	if _, err := o.PushHealth(table, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// run feeds one frame through the program with BPF_PROG_RUN.
func run(t *testing.T, o *loader.Objects, in []byte) (uint32, []byte) {
	t.Helper()
	return runProgram(t, o.Steadydns, in)
}

func dumpf(t *testing.T, format string, in, want, got []byte, args ...any) {
	t.Helper()
	t.Errorf(format+"\ninput:\n%s\nexpected:\n%s\nactual:\n%s", append(args, hex.Dump(in), hex.Dump(want), hex.Dump(got))...)
}

// pinCPU keeps the calling goroutine on one CPU until the test ends: the
// program's per-CPU state (the round-robin turn) and timings then come
// from one CPU. The thread's old affinity is restored before it is freed.
func pinCPU(t testing.TB, cpu int) {
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatalf("reading cpu affinity: %v", err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatalf("pinning to cpu %d: %v", cpu, err)
	}
	t.Cleanup(func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	})
}

// served is a config and its zone compiled and written into the maps, as
// the daemon writes them: the records, geo and the zone's SOA.
type served struct {
	cfg   *config.Config
	zone  *zone.Zone
	index map[string]uint32 // check id → entry
	comp  *records.Compiled
	geo   *geo.Table
}

// serve parses cfgText (whose zone is z.zone, zoneText) in a temporary
// directory, compiles it, and writes it into o's maps.
func serve(t testing.TB, o *loader.Objects, cfgText, zoneText string) served {
	t.Helper()
	return serveSigned(t, o, cfgText, zoneText, nil)
}

// serveSigned is serve with the zone signed online by s before it is
// compiled, as the daemon signs it; s nil leaves it unsigned.
func serveSigned(t testing.TB, o *loader.Objects, cfgText, zoneText string, s zone.Signer) served {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte(zoneText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(cfgText))
	if err != nil {
		t.Fatalf("%v\n%s", err, cfgText)
	}
	z, err := zone.Load("example.test.", filepath.Join(dir, "z.zone"))
	if err != nil {
		t.Fatal(err)
	}
	if s != nil {
		if err := z.SignOnline(s); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := health.Assign(cfg.Checks, nil, o.HealthCapacity())
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]uint32{}
	for k := range idx.Len() {
		index[cfg.Checks.ID(k)] = idx.EntryOf(k)
	}
	// The tests write the checks' entries by hand, without an aggregator
	// to derive a region's entries: candidates read their check's own.
	comp, err := records.Compile(cfg, []*zone.Zone{z}, func(check, _ string) (uint32, bool) { return idx.AnswerEntry(check, "") })
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SyncRecords(comp.Entries()); err != nil {
		t.Fatal(err)
	}
	g := geo.New(cfg.Server.Geo)
	v4, v6 := g.Entries()
	if err := o.SyncGeo(v4, v6, g.Orders()); err != nil {
		t.Fatal(err)
	}
	soa, ok := records.SOA(z)
	if !ok {
		t.Fatal("soa does not fit")
	}
	if err := o.PutZoneSOA(0, &soa); err != nil {
		t.Fatal(err)
	}
	return served{cfg: cfg, zone: z, index: index, comp: comp, geo: g}
}
