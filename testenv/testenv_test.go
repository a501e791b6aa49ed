package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestCheckPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"sd", true},
		{"t0a1b2c", true},
		{"a-b_C9", true},
		{"abcdefghijk", true},   // 11: "abcdefghijkb253" is 15
		{"abcdefghijkl", false}, // 12: a backend link would not fit
		{"", false},
		{"a/b", false},
		{"a b", false},
		{"a.b", false},
	} {
		if err := checkPrefix(tc.prefix); (err == nil) != tc.ok {
			t.Errorf("checkPrefix(%q) = %v, want ok=%v", tc.prefix, err, tc.ok)
		}
	}
}

func TestOwns(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   bool // whether Down("sd") removes a namespace of this name
		link bool // whether Down("sd") removes a root-namespace link of this name
	}{
		{"sd-client", true, false},
		{"sd-edge", true, false},
		{"sd-b1", true, false},
		{"sd-b253", true, false},
		{"sd-b254", false, false},
		{"sd-b01", false, false},
		{"sd-b", false, false},
		{"sd2-edge", false, false},
		{"sd-x-client", false, false},
		{"sdc0", false, true},
		{"sde0", false, true},
		{"sdbr", false, true},
		{"sdb7", false, true},
		{"sdp12", false, true},
		{"sdb", false, false},
		{"sdpx", false, false},
		{"sd", false, false},
		{"eth0", false, false},
		// the fleet's
		{"sd-c", true, false},
		{"sd-sw", true, false},
		{"sd-e1", true, false},
		{"sd-a99", true, false},
		{"sd-a100", false, false},
		{"sd-p1a", true, false},
		{"sd-p9z", true, false},
		{"sd-p0a", false, false},
		{"sd-r1", false, false},
		{"sd-x", false, false},
		{"sdc", false, true},
		{"sde1", false, true},
		{"sdp1a", false, true},
		{"sdsw", false, true},
		{"sdsc", false, true},
		{"sdse12", false, true},
		{"sdsp9z", false, true},
		{"sds", false, false},
		{"sdsx1", false, false},
		{"sdse0", false, false},
	} {
		if got := ownsNS("sd", tc.name); got != tc.ns {
			t.Errorf("ownsNS(sd, %q) = %v, want %v", tc.name, got, tc.ns)
		}
		if got := ownsLink("sd", tc.name); got != tc.link {
			t.Errorf("ownsLink(sd, %q) = %v, want %v", tc.name, got, tc.link)
		}
	}
}

func TestEnv(t *testing.T) {
	SkipUnlessRoot(t)
	t.Parallel()
	p := UniquePrefix()
	e, err := New(Options{Prefix: p, Backends: 2})
	if err != nil {
		t.Fatalf("creating testenv: %v", err)
	}
	t.Cleanup(func() { e.Close() }) // a no-op once the test has closed it
	c, edge, b1, b2 := e.Client, e.Edge, e.Backends[0], e.Backends[1]

	t.Run("udp", func(t *testing.T) {
		for _, tc := range []struct{ from, to netip.Addr }{{c.V4, edge.V4}, {c.V6, edge.V6}} {
			srv := udpEcho(t, edge, tc.to)
			got, err := udpAsk(c, srv)
			if err != nil {
				t.Fatalf("asking %s from the client: %v", srv, err)
			}
			if got != tc.from {
				t.Errorf("edge saw the query from %s, want %s", got, tc.from)
			}
		}
	})

	t.Run("tcp to backends", func(t *testing.T) {
		for _, b := range e.Backends {
			for _, a := range []netip.Addr{b.V4, b.V6} {
				srv := tcpHello(t, b, a)
				got, err := tcpAsk(edge, srv, 2*time.Second)
				if err != nil {
					t.Fatalf("dialing %s from the edge: %v", srv, err)
				}
				if got != b.Name {
					t.Errorf("%s answered %q, want %q", srv, got, b.Name)
				}
			}
		}
	})

	t.Run("set link", func(t *testing.T) {
		srv1, srv2 := tcpHello(t, b1, b1.V4), tcpHello(t, b2, b2.V4)
		srv2v6 := tcpHello(t, b2, b2.V6)
		if err := b2.SetLink(false); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := tcpAsk(edge, srv2, 500*time.Millisecond); err == nil {
			t.Fatalf("reached %s with its link down", srv2)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("dialing the downed backend took %v, want a bounded failure", d)
		}
		if _, err := tcpAsk(edge, srv1, 2*time.Second); err != nil {
			t.Errorf("backend 1 should stay reachable while backend 2 is down: %v", err)
		}
		if err := b2.SetLink(true); err != nil {
			t.Fatal(err)
		}
		for _, srv := range []netip.AddrPort{srv2, srv2v6} {
			if _, err := tcpAsk(edge, srv, 3*time.Second); err != nil {
				t.Errorf("dialing %s after SetLink(true): %v", srv, err)
			}
		}
	})

	t.Run("command", func(t *testing.T) {
		out, err := c.Command("ip", "-br", "addr").CombinedOutput()
		if err != nil {
			t.Fatalf("ip -br addr: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "198.18.0.1/24") || !strings.Contains(string(out), "fd53::1/64") {
			t.Errorf("client addresses missing from:\n%s", out)
		}
		if strings.Contains(string(out), "198.18.0.2") {
			t.Errorf("edge address shows up in the client namespace:\n%s", out)
		}
	})

	t.Run("do", func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before := threadNS(t)
		var inside string
		sentinel := errors.New("sentinel")
		err := c.Do(func() error {
			inside = threadNS(t)
			return sentinel
		})
		if !errors.Is(err, sentinel) {
			t.Errorf("Do returned %v, want fn's error", err)
		}
		if want := nsID(t, c.NSPath()); inside != want {
			t.Errorf("fn ran in %s, want %s", inside, want)
		}
		if after := threadNS(t); after != before {
			t.Errorf("thread left in %s, want %s", after, before)
		}
	})

	t.Run("xdp pass", func(t *testing.T) {
		prog := passProgram(t)
		if err := e.AttachPass(prog); err != nil {
			t.Fatal(err)
		}
		info, err := prog.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		if got := xdpOf(t, c); !got.Attached || got.AttachMode != nl.XDP_ATTACHED_DRV || got.ProgId != uint32(id) {
			t.Errorf("after AttachPass: %s has xdp %+v, want program %d in driver mode", c.Link, got, id)
		}
		if err := e.AttachPass(prog); err == nil {
			t.Error("a second AttachPass succeeded")
		}
		// Packets still reach the client through the pass program.
		if _, err := udpAsk(c, udpEcho(t, edge, edge.V4)); err != nil {
			t.Errorf("udp with xdp pass attached: %v", err)
		}
		if err := e.DetachPass(); err != nil {
			t.Fatal(err)
		}
		if got := xdpOf(t, c); got.Attached {
			t.Errorf("after DetachPass: %s still has xdp %+v", c.Link, got)
		}
		if err := e.DetachPass(); err != nil {
			t.Errorf("second DetachPass: %v", err)
		}
		// Leave one attached for Close to clean up.
		if err := e.AttachPass(prog); err != nil {
			t.Fatal(err)
		}
	})

	if err := e.Close(); err != nil {
		t.Fatalf("closing: %v", err)
	}
	assertGone(t, p, e.Hosts())
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Do(func() error { return nil }); err == nil {
		t.Error("Do after Close succeeded")
	}
}

// TestNewFailsCleanly makes New fail halfway: it must remove the client
// namespace it made and keep the edge namespace it did not make.
func TestNewFailsCleanly(t *testing.T) {
	SkipUnlessRoot(t)
	t.Parallel()
	p := UniquePrefix()
	ns, err := createNS(edgeNS(p))
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	t.Cleanup(func() { deleteNS(edgeNS(p)) })

	if e, err := New(Options{Prefix: p}); err == nil {
		e.Close()
		t.Fatal("New succeeded with the edge namespace taken")
	} else if !strings.Contains(err.Error(), "already exists") {
		t.Errorf("New: %v, want an 'already exists' error", err)
	}
	if _, err := os.Stat(nsPath(clientNS(p))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("client namespace left behind: %v", err)
	}
	if _, err := os.Stat(nsPath(edgeNS(p))); err != nil {
		t.Errorf("New removed a namespace it did not create: %v", err)
	}
}

func TestUpDown(t *testing.T) {
	SkipUnlessRoot(t)
	t.Parallel()
	p := UniquePrefix()
	t.Cleanup(func() { Down(p) })
	e, err := Up(Options{Prefix: p, Backends: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A link with our names in the root namespace, as an older tool might
	// have left; it has no addresses, so it changes nothing for the host.
	stray := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: backendLink(p, 9)}, PeerName: portLink(p, 9)}
	if err := netlink.LinkAdd(stray); err != nil {
		t.Fatalf("creating stray veth: %v", err)
	}
	out, err := e.Backends[0].Command("ip", "-br", "addr").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "198.18.1.1/24") {
		t.Fatalf("backend addresses: %v\n%s", err, out)
	}

	if err := Down(p); err != nil {
		t.Fatalf("Down: %v", err)
	}
	assertGone(t, p, e.Hosts())
	if err := Down(p); err != nil {
		t.Errorf("Down with nothing there: %v", err)
	}
	// The process still holds handles into the dead namespaces; Close must
	// cope with everything already being gone.
	if err := e.Close(); err != nil {
		t.Errorf("Close after Down: %v", err)
	}
}

// assertGone checks that no namespace file and no root-namespace link with
// the prefix is left.
func assertGone(t *testing.T, p string, hosts []*Host) {
	t.Helper()
	for _, h := range hosts {
		if _, err := os.Stat(h.NSPath()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", h.NSPath(), err)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, p) {
			t.Errorf("link %s left in the root namespace", l.Attrs().Name)
		}
	}
}

// udpEcho serves on h and answers each datagram with its source address.
func udpEcho(t *testing.T, h *Host, a netip.Addr) netip.AddrPort {
	t.Helper()
	var pc net.PacketConn
	err := h.Do(func() (err error) {
		pc, err = net.ListenPacket("udp", netip.AddrPortFrom(a, 0).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(from.(*net.UDPAddr).AddrPort().Addr().String()), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// udpAsk sends a datagram from h and returns the source address the server
// saw.
func udpAsk(h *Host, srv netip.AddrPort) (netip.Addr, error) {
	return udpAskWithin(h, srv, 2*time.Second)
}

func udpAskWithin(h *Host, srv netip.AddrPort, timeout time.Duration) (netip.Addr, error) {
	var conn net.Conn
	err := h.Do(func() (err error) {
		conn, err = net.Dial("udp", srv.String())
		return err
	})
	if err != nil {
		return netip.Addr{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("ping")); err != nil {
		return netip.Addr{}, err
	}
	buf := make([]byte, 100)
	n, err := conn.Read(buf)
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(string(buf[:n]))
}

// tcpHello listens on h and greets every connection with h's name.
func tcpHello(t *testing.T, h *Host, a netip.Addr) netip.AddrPort {
	t.Helper()
	var ln net.Listener
	err := h.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte(h.Name))
			conn.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

func tcpAsk(h *Host, srv netip.AddrPort, timeout time.Duration) (string, error) {
	var conn net.Conn
	err := h.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", srv.String(), timeout)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(conn)
	return string(b), err
}

func passProgram(t *testing.T) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
	})
	if err != nil {
		t.Skipf("SKIPPING: cannot load an XDP program, BPF unavailable? %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// xdpOf reads h's XDP state through a netlink handle of its own, independent
// of the one the package used to attach.
func xdpOf(t *testing.T, h *Host) netlink.LinkXdp {
	t.Helper()
	ns, err := netns.GetFromPath(h.NSPath())
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	l, err := nh.LinkByName(h.Link)
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().Xdp == nil {
		return netlink.LinkXdp{}
	}
	return *l.Attrs().Xdp
}

func threadNS(t *testing.T) string {
	t.Helper()
	return nsID(t, fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
}

// nsID identifies a namespace by device and inode, which is what setns(2)
// compares too.
func nsID(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// TestNoBackends covers the smallest environment, built through Start: the
// bridge has no ports and so no carrier, which must not hold New up.
func TestNoBackends(t *testing.T) {
	t.Parallel()
	e := Start(t, Options{})
	if len(e.Backends) != 0 {
		t.Fatalf("got %d backends, want 0", len(e.Backends))
	}
	if _, err := udpAsk(e.Client, udpEcho(t, e.Edge, e.Edge.V6)); err != nil {
		t.Errorf("udp over ipv6: %v", err)
	}
}
