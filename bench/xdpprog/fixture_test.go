package xdpprog_test

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// The fixtures below are a few of bpf's own test fixtures: the programs
// here are checked against the server's program and its maps.

var (
	server4 = netip.MustParseAddr("198.18.0.2")
	server6 = netip.MustParseAddr("fd53::2")
	client4 = netip.MustParseAddr("198.18.0.1")
	client6 = netip.MustParseAddr("fd53::1")
	srvMAC  = [6]byte{0x02, 0x53, 0, 0, 0, 2}
	cliMAC  = [6]byte{0x02, 0x53, 0, 0, 0, 1}

	label63 = strings.Repeat("a", 63)
	// 3 labels of 63 bytes and one of 61: 3*64 + 62 + 1 = 255 wire bytes.
	name255 = label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61) + "."
)

// testHealth is the health table's capacity in load.
const testHealth = 1024

// load loads the server's program into a private bpffs, so that tests
// never touch the pins of a running server.
func load(t testing.TB) *loader.Objects {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	o, err := loader.Load(loader.Options{BPFFS: dir + "/sd", HealthCapacity: testHealth, Servers: []netip.Addr{server4, server6}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// fixtures fills the record table with the sets the stage test asks for.
// No health table is pushed: a table not yet pushed answers every
// candidate, as if all were up.
func fixtures(t *testing.T, o *loader.Objects) {
	put(t, o, "www.example.test.", dns.TypeA, rrset(30, 8, "198.18.1.1", "198.18.1.2", "198.18.1.3"))
	put(t, o, "www.example.test.", dns.TypeAAAA, rrset(30, 8, "fd53:1::1", "fd53:1::2"))
	put(t, o, name255, dns.TypeAAAA, rrset(300, 8, "fd53:2::255"))
}

// wire is the lowercased wire form of a name, as the control plane keys it.
func wire(t testing.TB, name string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(name)), buf, 0, nil, false)
	if err != nil {
		t.Fatalf("packing %q: %v", name, err)
	}
	return string(buf[:n])
}

// rrset is a set of the addresses, each with a check of its own.
func rrset(ttl uint32, maxAnswers uint8, addrs ...string) *bpf.SteadydnsRrset {
	v := &bpf.SteadydnsRrset{Ttl: ttl, N: uint8(len(addrs)), MaxAnswers: maxAnswers}
	for i, s := range addrs {
		a := netip.MustParseAddr(s)
		if a.Is4() {
			b := a.As4()
			copy(v.Cand[i].Addr[:], b[:])
		} else {
			v.Cand[i].Addr = a.As16()
		}
		v.Cand[i].Check = uint32(i + 1)
	}
	return v
}

func put(t testing.TB, o *loader.Objects, name string, qtype uint16, v *bpf.SteadydnsRrset) {
	t.Helper()
	if err := o.PutRecord(loader.RecordKey{Wire: wire(t, name), Qtype: qtype}, v); err != nil {
		t.Fatal(err)
	}
}

// query packs a query; mutate may edit the message before packing.
func query(name string, qtype uint16, mutate func(*dns.Msg)) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	m.RecursionDesired = true
	if mutate != nil {
		mutate(m)
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func withOpt(size uint16, do bool) func(*dns.Msg) {
	return func(m *dns.Msg) { m.SetEdns0(size, do) }
}

func frame(v6 bool, payload []byte, c packet.Checksum) packet.Frame {
	f := packet.Frame{Src: netip.AddrPortFrom(client4, 40000), Dst: netip.AddrPortFrom(server4, 53), SrcMAC: cliMAC, DstMAC: srvMAC, Payload: payload, Checksum: c}
	if v6 {
		f.Src, f.Dst = netip.AddrPortFrom(client6, 40000), netip.AddrPortFrom(server6, 53)
	}
	return f
}

// runProgram feeds one frame through p with BPF_PROG_RUN, with room for
// the reply to grow.
func runProgram(t *testing.T, p *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, 4096)}
	ret, err := p.Run(opts)
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	return ret, opts.DataOut
}
