package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/steadydns/steadydns/bench/xdpprog"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func TestFleetPlan(t *testing.T) {
	for _, tc := range []struct {
		m            member
		short, role  string
		v4, v6, mac  string
		longestLinks bool
	}{
		{member{kind: kindClient, index: 1}, "c", "client", "198.18.64.1", "fd53:64::64:1", "02:53:64:00:00:01", false},
		{member{kind: kindEdge, index: 12}, "e12", "e12", "198.18.65.12", "fd53:64::65:12", "02:53:65:00:00:0c", false},
		{member{kind: kindAggregator, index: 2}, "a2", "a2", "198.18.66.2", "fd53:64::66:2", "02:53:66:00:00:02", false},
		{member{kind: kindBackend, index: 99}, "b99", "b99", "198.18.67.99", "fd53:64::67:99", "02:53:67:00:00:63", true},
		{member{kind: kindProber, region: 1, index: 1}, "p1a", "p1a", "198.18.71.1", "fd53:64::71:1", "02:53:71:00:00:01", false},
		{member{kind: kindProber, region: 9, index: 26}, "p9z", "p9z", "198.18.79.26", "fd53:64::79:26", "02:53:79:00:00:1a", true},
	} {
		if got := tc.m.short(); got != tc.short {
			t.Errorf("%+v: short %q, want %q", tc.m, got, tc.short)
		}
		if got := tc.m.role(); got != tc.role {
			t.Errorf("%+v: role %q, want %q", tc.m, got, tc.role)
		}
		if got := tc.m.v4().String(); got != tc.v4 {
			t.Errorf("%s: v4 %s, want %s", tc.role, got, tc.v4)
		}
		if got := tc.m.v6().String(); got != tc.v6 {
			t.Errorf("%s: v6 %s, want %s", tc.role, got, tc.v6)
		}
		if got := tc.m.mac().String(); got != tc.mac {
			t.Errorf("%s: mac %s, want %s", tc.role, got, tc.mac)
		}
		if back, ok := parseShort(tc.short); !ok || back != tc.m {
			t.Errorf("parseShort(%q) = %+v, %v; want %+v", tc.short, back, ok, tc.m)
		}
		fleet := netip.MustParsePrefix("198.18.64.0/20")
		if !fleet.Contains(tc.m.v4()) {
			t.Errorf("%s: %s outside %s", tc.role, tc.m.v4(), fleet)
		}
		long := strings.Repeat("x", maxPrefix)
		for _, l := range []string{fleetLink(long, tc.m), fleetPort(long, tc.m), switchBridge(long)} {
			if len(l) > 15 {
				t.Errorf("link name %q is %d bytes, more than 15", l, len(l))
			}
		}
		if tc.longestLinks && len(fleetPort(long, tc.m)) != 15 {
			t.Errorf("%s: port name %q should be the longest, 15 bytes", tc.role, fleetPort(long, tc.m))
		}
	}
	for _, s := range []string{"", "e0", "e01", "e100", "a", "p0a", "p1", "p1A", "p1aa", "pa1", "client", "x1", "sw"} {
		if m, ok := parseShort(s); ok {
			t.Errorf("parseShort(%q) = %+v, want no member", s, m)
		}
	}
	for _, tc := range []struct {
		opts FleetOptions
		ok   bool
	}{
		{FleetOptions{}, true},
		{FleetOptions{Regions: 9, ProbersPerRegion: 26, Edges: 99, Aggregators: 99, Backends: 99}, true},
		{FleetOptions{Regions: 10}, false},
		{FleetOptions{ProbersPerRegion: 27}, false},
		{FleetOptions{Edges: 100}, false},
		{FleetOptions{Aggregators: -1}, false},
		{FleetOptions{Backends: 100}, false},
		{FleetOptions{Prefix: "abcdefghijkl"}, false},
	} {
		if err := tc.opts.fill(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.opts, err, tc.ok)
		}
	}
	def := FleetOptions{}
	def.fill()
	if want := (FleetOptions{Prefix: "sd", Regions: 3, ProbersPerRegion: 2, Edges: 2, Aggregators: 2}); def != want {
		t.Errorf("defaults %+v, want %+v", def, want)
	}
}

// TestFleet builds the default fleet with two backends and checks what
// tests of the fleet rely on: every host talks to every other until a pair
// is cut, a cut is silent and total for that pair only, and healing brings
// even a stalled connection back.
func TestFleet(t *testing.T) {
	SkipUnlessRoot(t)
	t.Parallel()
	p := UniquePrefix()
	f, err := NewFleet(FleetOptions{Prefix: p, Backends: 2})
	if err != nil {
		t.Fatalf("creating fleet: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // a no-op once the test has closed it
	e1, a1, b1 := f.Edges[0], f.Aggregators[0], f.Backends[0]
	m := startMesh(t, f)

	t.Run("layout", func(t *testing.T) {
		if len(f.Hosts()) != 13 || len(f.Edges) != 2 || len(f.Aggregators) != 2 || len(f.Backends) != 2 {
			t.Fatalf("got %d hosts, %d edges, %d aggregators, %d backends", len(f.Hosts()), len(f.Edges), len(f.Aggregators), len(f.Backends))
		}
		if strings.Join(f.Regions, ",") != "r1,r2,r3" || len(f.Probers) != 3 {
			t.Fatalf("regions %v with %d prober lists, want r1,r2,r3", f.Regions, len(f.Probers))
		}
		for _, tc := range []struct {
			h          *Host
			role, ns   string
			v4, v6     string
			link, port string
		}{
			{f.Client, "client", p + "-c", "198.18.64.1", "fd53:64::64:1", p + "c", p + "sc"},
			{e1, "e1", p + "-e1", "198.18.65.1", "fd53:64::65:1", p + "e1", p + "se1"},
			{f.Aggregators[1], "a2", p + "-a2", "198.18.66.2", "fd53:64::66:2", p + "a2", p + "sa2"},
			{f.Probers[2][1], "p3b", p + "-p3b", "198.18.73.2", "fd53:64::73:2", p + "p3b", p + "sp3b"},
			{f.Backends[1], "b2", p + "-b2", "198.18.67.2", "fd53:64::67:2", p + "b2", p + "sb2"},
		} {
			h := tc.h
			if h.Role != tc.role || h.Name != tc.ns || h.V4.String() != tc.v4 || h.V6.String() != tc.v6 || h.Link != tc.link || h.Peer != tc.port {
				t.Errorf("host %s %s %s %s %s %s, want %s %s %s %s %s %s", h.Role, h.Name, h.V4, h.V6, h.Link, h.Peer,
					tc.role, tc.ns, tc.v4, tc.v6, tc.link, tc.port)
			}
		}
		if f.Switch.Name != p+"-sw" || f.Switch.Link != p+"sw" {
			t.Errorf("switch %s with bridge %s, want %s-sw with %ssw", f.Switch.Name, f.Switch.Link, p, p)
		}
		for name, want := range map[string][]*Host{"client": {f.Client}, "a2": {f.Aggregators[1]}, "p2a": {f.Probers[1][0]}, "r2": f.Probers[1]} {
			got, err := f.Lookup(name)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Lookup(%s) = %v, %v; want %v", name, got, err, want)
			}
		}
		for _, name := range []string{"r4", "e3", "c", "sw", ""} {
			if _, err := f.Lookup(name); err == nil {
				t.Errorf("Lookup(%q) found something", name)
			}
		}
		out, err := f.Probers[0][1].Command("ip", "-br", "addr").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "198.18.71.2/20") || !strings.Contains(string(out), "fd53:64::71:2/64") {
			t.Errorf("p1b's addresses: %v\n%s", err, out)
		}
	})

	t.Run("mesh", func(t *testing.T) { m.check(t, nil) })

	t.Run("edge from aggregator", func(t *testing.T) {
		// Connections open before the cut, over both families.
		var conns []*tcpPair
		for _, fam := range []func(*Host) netip.Addr{v4Of, v6Of} {
			conns = append(conns, dialPair(t, e1, a1, fam(a1)))
		}
		if err := f.Partition(e1, a1); err != nil {
			t.Fatal(err)
		}
		if !f.Cut(e1, a1) || !f.Cut(a1, e1) || f.Cut(e1, f.Aggregators[1]) {
			t.Error("Cut does not report e1-a1 cut both ways and e1-a2 open")
		}
		if err := f.Partition(e1, a1); err != nil {
			t.Errorf("cutting a cut pair again: %v", err)
		}
		m.check(t, [][2]*Host{{e1, a1}})
		for _, c := range conns {
			c.stalls(t)
		}
		for _, to := range []netip.Addr{a1.V4, a1.V6} {
			if err := ping(e1, to, 300*time.Millisecond); err == nil {
				t.Errorf("ping %s from e1 got an answer across the cut", to)
			}
		}
		if err := ping(e1, f.Aggregators[1].V6, 2*time.Second); err != nil {
			t.Errorf("ping a2 from e1: %v", err)
		}
		if _, err := tcpAsk(a1, tcpHello(t, e1, e1.V4), 300*time.Millisecond); err == nil {
			t.Error("a new tcp connection crossed the cut")
		}
		// The cut frames die in the switch: they reach no other host, where
		// an XDP program would see them before the kernel drops them.
		e2 := f.Edges[1]
		before := rxPackets(t, e2)
		const n = 100
		for range n {
			udpAskWithin(e1, m.srvs[a1][0], time.Millisecond)
		}
		if got := rxPackets(t, e2) - before; got >= n {
			t.Errorf("e2 received %d frames while e1 sent %d to a1 across the cut", got, n)
		}

		if err := f.Heal(e1, a1); err != nil {
			t.Fatal(err)
		}
		if f.Cut(e1, a1) || f.Cut(a1, e1) {
			t.Error("Cut still reports e1-a1 after Heal")
		}
		for _, c := range conns {
			c.resumes(t)
		}
		for _, to := range []netip.Addr{a1.V4, a1.V6} {
			if err := ping(e1, to, 2*time.Second); err != nil {
				t.Errorf("ping %s from e1 after Heal: %v", to, err)
			}
		}
		m.check(t, nil)
	})

	t.Run("region from backend", func(t *testing.T) {
		if err := f.PartitionRegion("r1", b1); err != nil {
			t.Fatal(err)
		}
		if err := f.Partition(f.Client, f.Edges[1]); err != nil {
			t.Fatal(err)
		}
		m.check(t, [][2]*Host{{f.Probers[0][0], b1}, {f.Probers[0][1], b1}, {f.Client, f.Edges[1]}})
		if err := f.HealRegion("r1", b1); err != nil {
			t.Fatal(err)
		}
		m.check(t, [][2]*Host{{f.Client, f.Edges[1]}})
		if err := f.PartitionRegion("r9", b1); err == nil {
			t.Error("PartitionRegion of a missing region succeeded")
		}
		if err := f.HealAll(); err != nil {
			t.Fatal(err)
		}
		m.check(t, nil)
	})

	t.Run("misuse", func(t *testing.T) {
		if err := f.Partition(e1, e1); err == nil {
			t.Error("cut a host from itself")
		}
		if err := f.Partition(e1, f.Switch); err == nil {
			t.Error("cut a host from the switch")
		}
		other := &Host{Role: "e1"}
		if err := f.Partition(other, a1); err == nil {
			t.Error("cut a host of another fleet")
		}
	})

	t.Run("open", func(t *testing.T) {
		// Another process finds the fleet and its cuts from the kernel alone.
		if err := f.PartitionRegion("r2", b1); err != nil {
			t.Fatal(err)
		}
		g, err := OpenFleet(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Hosts()) != len(f.Hosts()) || strings.Join(g.Regions, ",") != "r1,r2,r3" {
			t.Errorf("OpenFleet found %d hosts in %v, want %d in r1,r2,r3", len(g.Hosts()), g.Regions, len(f.Hosts()))
		}
		gb1 := g.Backends[0]
		if !g.Cut(g.Probers[1][0], gb1) || !g.Cut(gb1, g.Probers[1][1]) || g.Cut(g.Probers[0][0], gb1) {
			t.Error("OpenFleet did not read back the r2-b1 cut")
		}
		if err := g.HealAll(); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		m.check(t, nil) // healed, and Close left the fleet standing
	})

	t.Run("xdp pass", func(t *testing.T) { testFleetXDP(t, f) })

	if err := f.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}
	assertGone(t, p, append(f.Hosts(), f.Switch))
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testFleetXDP runs the benchmark's reflector in native mode on e1's veth:
// its XDP_TX replies reach the client only once AttachPass has put a program
// on e1's switch port.
func testFleetXDP(t *testing.T, f *Fleet) {
	var refl xdpprog.ReflectorObjects
	if err := xdpprog.LoadReflectorObjects(&refl, nil); err != nil {
		t.Skipf("SKIPPING: cannot load the reflector, BPF unavailable? %v", err)
	}
	defer refl.Close()
	e1 := f.Edges[0]
	if err := setXDP(e1, e1.Link, refl.Reflector.FD(), nl.XDP_FLAGS_DRV_MODE); err != nil {
		t.Fatalf("attaching the reflector to e1: %v", err)
	}
	defer setXDP(e1, e1.Link, -1, nl.XDP_FLAGS_DRV_MODE)
	srv := netip.AddrPortFrom(e1.V4, 53)
	if err := askReflector(f.Client, srv, 500*time.Millisecond); err == nil {
		t.Fatal("a native XDP_TX reply arrived with no program on e1's port: the test cannot tell AttachPass's effect")
	}
	if err := f.AttachPass(passProgram(t)); err != nil {
		t.Fatal(err)
	}
	if got := xdpOn(t, f.Switch, e1.Peer); !got.Attached || got.AttachMode != nl.XDP_ATTACHED_DRV {
		t.Errorf("after AttachPass: %s has xdp %+v, want a program in driver mode", e1.Peer, got)
	}
	if err := askReflector(f.Client, srv, 2*time.Second); err != nil {
		t.Errorf("asking the reflector on e1 with AttachPass: %v", err)
	}
	if err := f.DetachPass(); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Edges {
		if got := xdpOn(t, f.Switch, e.Peer); got.Attached {
			t.Errorf("after DetachPass: %s still has xdp %+v", e.Peer, got)
		}
	}
}

// askReflector sends a DNS header to srv and wants it back with QR set. The
// reflector patches UDP checksums rather than computing them, so the query
// goes without one (SO_NO_CHECK), as the veth would otherwise leave it to be
// filled in later.
func askReflector(h *Host, srv netip.AddrPort, timeout time.Duration) error {
	var conn *net.UDPConn
	err := h.Do(func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(srv))
		if err != nil {
			return err
		}
		conn = c
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_NO_CHECK, 1)
		}); err != nil {
			return err
		}
		return serr
	})
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	query := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	if _, err := conn.Write(query); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if n != len(query) || buf[0] != 0x12 || buf[1] != 0x34 || buf[2]&0x80 == 0 {
		return fmt.Errorf("reply % x is not the query with QR set", buf[:n])
	}
	return nil
}

func xdpOn(t *testing.T, h *Host, link string) netlink.LinkXdp {
	t.Helper()
	l, err := h.nl.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().Xdp == nil {
		return netlink.LinkXdp{}
	}
	return *l.Attrs().Xdp
}

// TestNewFleetFailsCleanly makes NewFleet fail halfway: it must remove what
// it made and keep the namespace it did not make.
func TestNewFleetFailsCleanly(t *testing.T) {
	SkipUnlessRoot(t)
	t.Parallel()
	p := UniquePrefix()
	taken := fleetNS(p, member{kind: kindAggregator, index: 1})
	ns, err := createNS(taken)
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	t.Cleanup(func() { deleteNS(taken) })
	if f, err := NewFleet(FleetOptions{Prefix: p, Regions: 1, ProbersPerRegion: 1, Edges: 1, Aggregators: 1}); err == nil {
		f.Close()
		t.Fatal("NewFleet succeeded with a1's namespace taken")
	} else if !strings.Contains(err.Error(), "already exists") {
		t.Errorf("NewFleet: %v, want an 'already exists' error", err)
	}
	for _, name := range []string{switchNS(p), p + "-c", p + "-e1"} {
		if _, err := os.Stat(nsPath(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", name, err)
		}
	}
	if _, err := os.Stat(nsPath(taken)); err != nil {
		t.Errorf("NewFleet removed a namespace it did not create: %v", err)
	}
}

// TestFleetDown: Down removes a fleet that no process holds any more, as
// `steadydns testenv down` does after `up --fleet`.
func TestFleetDown(t *testing.T) {
	SkipUnlessRoot(t)
	t.Parallel()
	p := UniquePrefix()
	t.Cleanup(func() { Down(p) })
	f, err := NewFleet(FleetOptions{Prefix: p, Regions: 2, ProbersPerRegion: 1, Edges: 1, Aggregators: 1, Backends: 1})
	if err != nil {
		t.Fatal(err)
	}
	hosts := append(f.Hosts(), f.Switch)
	for _, h := range hosts {
		h.release() // as when the process that built it exits
	}
	if err := Down(p); err != nil {
		t.Fatalf("Down: %v", err)
	}
	assertGone(t, p, hosts)
	if _, err := OpenFleet(p); err == nil {
		t.Error("OpenFleet found a fleet after Down")
	}
}

// mesh has a UDP echo server on both addresses of every host of a fleet.
type mesh struct {
	f    *Fleet
	srvs map[*Host][2]netip.AddrPort
}

func startMesh(t *testing.T, f *Fleet) *mesh {
	m := &mesh{f: f, srvs: map[*Host][2]netip.AddrPort{}}
	for _, h := range f.Hosts() {
		m.srvs[h] = [2]netip.AddrPort{udpEcho(t, h, h.V4), udpEcho(t, h, h.V6)}
	}
	return m
}

// check asks every host's servers from every other host, over both
// families, all at once: the cut pairs, in either direction, must get no
// answer and every other pair must get one that names the right source.
func (m *mesh) check(t *testing.T, cut [][2]*Host) {
	t.Helper()
	isCut := func(a, b *Host) bool {
		for _, c := range cut {
			if c[0] == a && c[1] == b || c[0] == b && c[1] == a {
				return true
			}
		}
		return false
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for _, from := range m.f.Hosts() {
		for _, to := range m.f.Hosts() {
			if from == to {
				continue
			}
			for fam, srv := range m.srvs[to] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want := []netip.Addr{from.V4, from.V6}[fam]
					got, err := udpAsk(from, srv)
					var msg string
					switch {
					case isCut(from, to) && err == nil:
						msg = fmt.Sprintf("%s reached %s at %s across a cut", from, to, srv)
					case !isCut(from, to) && err != nil:
						msg = fmt.Sprintf("%s to %s at %s: %v", from, to, srv, err)
					case err == nil && got != want:
						msg = fmt.Sprintf("%s saw %s's datagram from %s, want %s", to, from, got, want)
					}
					if msg != "" {
						mu.Lock()
						errs = append(errs, msg)
						mu.Unlock()
					}
				}()
			}
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Errorf("%d of %d exchanges went wrong:\n%s", len(errs), 2*len(m.srvs)*(len(m.srvs)-1), strings.Join(errs, "\n"))
	}
}

func rxPackets(t *testing.T, h *Host) uint64 {
	t.Helper()
	l, err := h.nl.LinkByName(h.Link)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Statistics.RxPackets
}

// String lets test messages name hosts by role.
func (h *Host) String() string { return h.Role }

func v4Of(h *Host) netip.Addr { return h.V4 }
func v6Of(h *Host) netip.Addr { return h.V6 }

// tcpPair is both ends of one TCP connection between two hosts.
type tcpPair struct {
	client, server net.Conn
}

func dialPair(t *testing.T, from, to *Host, a netip.Addr) *tcpPair {
	t.Helper()
	var ln net.Listener
	if err := to.Do(func() (err error) { ln, err = net.Listen("tcp", netip.AddrPortFrom(a, 0).String()); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var c net.Conn
	if err := from.Do(func() (err error) { c, err = net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	p := &tcpPair{c, s}
	t.Cleanup(func() { c.Close(); s.Close() })
	for _, dir := range [][2]net.Conn{{c, s}, {s, c}} {
		if err := send(dir[0], dir[1], "hello", 2*time.Second); err != nil {
			t.Fatalf("before the cut: %v", err)
		}
	}
	return p
}

// stalls writes both ways and wants neither write delivered.
func (p *tcpPair) stalls(t *testing.T) {
	t.Helper()
	for _, dir := range [][2]net.Conn{{p.client, p.server}, {p.server, p.client}} {
		if _, err := dir[0].Write([]byte("cut")); err != nil {
			t.Fatalf("writing across the cut: %v", err)
		}
		dir[1].SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		buf := make([]byte, 16)
		if n, err := dir[1].Read(buf); err == nil {
			t.Errorf("%s → %s: %q crossed the cut", dir[0].LocalAddr(), dir[0].RemoteAddr(), buf[:n])
		}
	}
}

// resumes wants what stalls wrote to arrive once the pair is healed: the
// cut dropped packets, it did not break the connection.
func (p *tcpPair) resumes(t *testing.T) {
	t.Helper()
	for _, c := range []net.Conn{p.server, p.client} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 3)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "cut" {
			t.Errorf("%s after Heal: read %q, %v; want the stalled \"cut\"", c.LocalAddr(), buf, err)
		}
	}
}

func send(from, to net.Conn, msg string, timeout time.Duration) error {
	if _, err := from.Write([]byte(msg)); err != nil {
		return err
	}
	to.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(to, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("sent %q, got %q", msg, buf)
	}
	return nil
}

// ping sends one ICMP echo request from h and waits for the reply.
func ping(h *Host, to netip.Addr, timeout time.Duration) error {
	network, proto := "ip4:icmp", 1
	var req, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	src := h.V4
	if to.Is6() {
		network, proto, req, reply, src = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, h.V6
	}
	var c *icmp.PacketConn
	if err := h.Do(func() (err error) { c, err = icmp.ListenPacket(network, src.String()); return err }); err != nil {
		return err
	}
	defer c.Close()
	id := os.Getpid() & 0xffff
	msg := icmp.Message{Type: req, Body: &icmp.Echo{ID: id, Seq: 1, Data: []byte("steadydns")}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(b, &net.IPAddr{IP: to.AsSlice()}); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && m.Type == reply && e.ID == id && from.String() == to.String() {
			return nil
		}
	}
}
