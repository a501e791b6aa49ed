// Package xdptest holds what the tests that run XDP programs through
// BPF_PROG_RUN share: the test hosts' addresses, a load of the server's
// program into a private bpffs, and the queries and frames fed to it.
package xdptest

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// The addresses and MACs of the server and the client in every frame.
var (
	Server4   = netip.MustParseAddr("198.18.0.2")
	Server6   = netip.MustParseAddr("fd53::2")
	Client4   = netip.MustParseAddr("198.18.0.1")
	Client6   = netip.MustParseAddr("fd53::1")
	ServerMAC = [6]byte{0x02, 0x53, 0, 0, 0, 2}
	ClientMAC = [6]byte{0x02, 0x53, 0, 0, 0, 1}
)

// HealthCapacity is the health table's capacity in Load.
const HealthCapacity = 1024

// ExtCapacity is the ext map's entries in Load: room for the tests' sets
// that a slot cannot hold.
const ExtCapacity = 1024

// Load loads the server's program with opts into a private bpffs, so a
// test never touches the pins of a running server; it sets the pin
// directory, the health capacity and the server addresses. It skips the
// test when not root.
func Load(t testing.TB, opts loader.Options) *loader.Objects {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	opts.BPFFS, opts.HealthCapacity, opts.Servers = dir+"/sd", HealthCapacity, []netip.Addr{Server4, Server6}
	if opts.ExtCapacity == 0 {
		opts.ExtCapacity = ExtCapacity
	}
	o, err := loader.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// Wire is the lowercased wire form of a name, as the control plane keys it.
func Wire(t testing.TB, name string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(name)), buf, 0, nil, false)
	if err != nil {
		t.Fatalf("packing %q: %v", name, err)
	}
	return string(buf[:n])
}

// Query packs a query; mutate may edit the message before packing.
func Query(name string, qtype uint16, mutate func(*dns.Msg)) []byte {
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

// Frame is payload from the client to the server, over IPv6 or IPv4.
func Frame(v6 bool, payload []byte, c packet.Checksum) packet.Frame {
	f := packet.Frame{Src: netip.AddrPortFrom(Client4, 40000), Dst: netip.AddrPortFrom(Server4, 53), SrcMAC: ClientMAC, DstMAC: ServerMAC, Payload: payload, Checksum: c}
	if v6 {
		f.Src, f.Dst = netip.AddrPortFrom(Client6, 40000), netip.AddrPortFrom(Server6, 53)
	}
	return f
}

// Run feeds one frame through p with BPF_PROG_RUN, with room for the reply
// to grow.
func Run(t testing.TB, p *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, 4096)}
	ret, err := p.Run(opts)
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	return ret, opts.DataOut
}
