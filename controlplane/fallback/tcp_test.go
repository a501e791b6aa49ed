package fallback

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

// The TCP tests serve on the edge host of a test environment and connect
// from the edge itself, from 198.18.0.2 and from 198.18.9.2 (a second
// client prefix, on the edge's loopback).

var (
	serverAddr = netip.MustParseAddr("198.18.0.2")
	otherAddr  = netip.MustParseAddr("198.18.9.2")
)

type tcpEvents struct{ opened, closed, refused, idle, evicted atomic.Int64 }

func (e *tcpEvents) observe(ev TCPEvent) {
	map[TCPEvent]*atomic.Int64{TCPOpened: &e.opened, TCPClosed: &e.closed, TCPRefused: &e.refused, TCPIdleTimeout: &e.idle, TCPEvicted: &e.evicted}[ev].Add(1)
}

func (e *tcpEvents) open() int64 { return e.opened.Load() - e.closed.Load() }

type tcpRig struct {
	env    *testenv.Env
	s      *Server
	addr   netip.AddrPort
	events *tcpEvents
}

func tcpEnv(t *testing.T) *testenv.Env {
	env := testenv.Start(t, testenv.Options{})
	if out, err := env.Edge.Command("ip", "addr", "add", otherAddr.String()+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("adding %s: %v: %s", otherAddr, err, out)
	}
	return env
}

func startTCP(t *testing.T, env *testenv.Env, lim TCPLimits) *tcpRig {
	t.Helper()
	v, _ := exampleView(t)
	r := &tcpRig{env: env, events: &tcpEvents{}}
	r.s = New(Options{Listen: []netip.AddrPort{netip.AddrPortFrom(serverAddr, 0)}, TCP: lim, OnTCP: r.events.observe}, v)
	if err := env.Edge.Do(r.s.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	r.addr = r.s.Addrs()[1].(*net.TCPAddr).AddrPort()
	return r
}

// dial connects from src.
func (r *tcpRig) dial(t *testing.T, src netip.Addr) *net.TCPConn {
	t.Helper()
	var c net.Conn
	err := r.env.Edge.Do(func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}
		c, err = d.Dial("tcp", r.addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func tcpQuery(t *testing.T, id uint16) []byte {
	m := query("static.example.test.", dns.TypeA)
	m.Id = id
	raw := pack(t, m)
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(raw))), raw...)
}

// readReply reads one reply and returns its ID, or the error that ended
// the read.
func readReply(c net.Conn, wait time.Duration) (uint16, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return 0, err
	}
	b := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, err
	}
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		return 0, err
	}
	if len(m.Answer) == 0 {
		return 0, fmt.Errorf("reply %d has no answer", m.Id)
	}
	return m.Id, nil
}

// ask sends one query on c and expects its reply.
func ask(t *testing.T, c net.Conn, id uint16) {
	t.Helper()
	if _, err := c.Write(tcpQuery(t, id)); err != nil {
		t.Fatal(err)
	}
	got, err := readReply(c, 2*time.Second)
	if err != nil || got != id {
		t.Fatalf("reply %d, %v; want reply %d", got, err, id)
	}
}

// closedByServer reports whether the server closed c: a read ends in EOF
// or a reset within wait.
func closedByServer(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func waitFor(t *testing.T, what string, wait time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", wait, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverSockets counts the connected sockets of the port that have a file
// descriptor: in /proc's table, sockets of local port port, not listening,
// with an inode (a socket the kernel keeps after its close, in TIME_WAIT
// or FIN_WAIT, has none). The clients' sockets have another local port.
func (r *tcpRig) serverSockets(t *testing.T) int {
	t.Helper()
	n := 0
	err := r.env.Edge.Do(func() error {
		// thread-self: the table of the namespace this thread is in.
		f, err := os.Open("/proc/thread-self/net/tcp")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			local, state, inode := fs[1], fs[3], fs[9]
			port, err := strconv.ParseUint(local[strings.IndexByte(local, ':')+1:], 16, 16)
			if err != nil {
				return err
			}
			if uint16(port) == r.addr.Port() && state != "0A" && inode != "0" {
				n++
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTCPTenThousandIdle opens 10,000 connections that never send a byte.
// The server keeps at most MaxConnections of them, closing the longest
// idle to admit each new one, so its sockets and goroutines stay bounded;
// it keeps answering UDP and new TCP clients meanwhile; and it frees
// everything when the clients go.
func TestTCPTenThousandIdle(t *testing.T) {
	const clients, limit = 10000, 200
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < clients+limit+1000 {
		t.Skipf("RLIMIT_NOFILE allows %d files, the test needs %d", lim.Max, clients+limit+1000)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{MaxConnections: limit, MaxPerPrefix: clients, IdleTimeout: time.Minute})
	baseGoroutines := runtime.NumGoroutine()

	conns := make([]net.Conn, 0, clients)
	err := env.Edge.Do(func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(serverAddr, 0)), Timeout: 5 * time.Second}
		for range clients {
			c, err := d.Dial("tcp", r.addr.String())
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		t.Fatalf("after %d connections: %v", len(conns), err)
	}
	waitFor(t, "the server to accept every connection", 30*time.Second, func() bool {
		return r.events.opened.Load()+r.events.refused.Load() == clients
	})
	if n := r.events.open(); n > limit {
		t.Errorf("%d connections open, limit %d", n, limit)
	}
	if n := r.serverSockets(t); n > limit {
		t.Errorf("the server holds %d sockets, limit %d", n, limit)
	}
	if n := runtime.NumGoroutine() - baseGoroutines; n > limit+10 {
		t.Errorf("%d goroutines more than before the clients, limit %d connections", n, limit)
	}
	if r.events.evicted.Load() < clients-limit {
		t.Errorf("%d idle connections closed to admit new ones, want at least %d", r.events.evicted.Load(), clients-limit)
	}
	// The newest are the ones kept; the oldest were closed.
	if !closedByServer(conns[0], 5*time.Second) {
		t.Error("the oldest idle connection is still open")
	}
	ask(t, conns[len(conns)-1], 1)

	t.Run("udp answered", func(t *testing.T) {
		err := env.Edge.Do(func() error {
			m, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(query("static.example.test.", dns.TypeA), r.addr.String())
			if err == nil && len(m.Answer) == 0 {
				err = errors.New("no answer")
			}
			return err
		})
		if err != nil {
			t.Error(err)
		}
	})
	t.Run("new tcp client answered", func(t *testing.T) {
		ask(t, r.dial(t, otherAddr), 2)
	})

	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "every connection to close", 10*time.Second, func() bool {
		return r.events.open() == 0 && r.serverSockets(t) == 0
	})
	waitFor(t, "the connections' goroutines to end", 10*time.Second, func() bool {
		return runtime.NumGoroutine() <= baseGoroutines
	})
}

// TestTCPPerPrefix fills one client prefix: a new connection from it
// closes that prefix's longest idle one, or is refused when none is idle,
// and another prefix is served throughout.
func TestTCPPerPrefix(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{MaxConnections: 100, MaxPerPrefix: 3, IdleTimeout: time.Minute})
	var mine []*net.TCPConn
	for i := range 3 {
		c := r.dial(t, serverAddr)
		ask(t, c, uint16(i)) // accepted, and idle from its reply on
		mine = append(mine, c)
	}
	other := r.dial(t, otherAddr)
	ask(t, other, 10)

	fourth := r.dial(t, serverAddr)
	ask(t, fourth, 3)
	if !closedByServer(mine[0], 5*time.Second) {
		t.Fatal("the prefix's longest idle connection stayed open past its limit")
	}
	for _, c := range mine[1:] {
		ask(t, c, 4)
	}
	ask(t, other, 11)
	if n := r.events.evicted.Load(); n != 1 {
		t.Errorf("%d connections closed to admit others, want 1", n)
	}

	// Half a length prefix each: all three are reading a query, none is
	// idle.
	for _, c := range append(mine[1:], fourth) {
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	// The reset can come before the connect returns.
	var refused net.Conn
	err := env.Edge.Do(func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(serverAddr, 0))}
		refused, err = d.Dial("tcp", r.addr.String())
		return err
	})
	switch {
	case errors.Is(err, syscall.ECONNRESET):
	case err != nil:
		t.Fatal(err)
	case !closedByServer(refused, 5*time.Second):
		t.Error("a connection past the prefix's limit was served while none was idle")
	default:
		refused.Close()
	}
	if n := r.events.refused.Load(); n != 1 {
		t.Errorf("%d connections refused, want 1", n)
	}
	ask(t, r.dial(t, otherAddr), 12)
}

// TestTCPPipelining sends more queries in one write than a connection may
// have answered: the first MaxQueries are answered in order, then the
// server closes the connection.
func TestTCPPipelining(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{MaxQueries: 3})
	c := r.dial(t, serverAddr)
	var burst []byte
	for id := range uint16(5) {
		burst = append(burst, tcpQuery(t, id)...)
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	for id := range uint16(3) {
		got, err := readReply(c, 2*time.Second)
		if err != nil || got != id {
			t.Fatalf("reply %d, %v; want reply %d", got, err, id)
		}
	}
	if !closedByServer(c, 5*time.Second) {
		t.Error("the connection stayed open after MaxQueries replies")
	}
}

// TestTCPTimeouts: an idle connection closes after IdleTimeout, and one
// that starts a query and never finishes it after the I/O bound.
func TestTCPTimeouts(t *testing.T) {
	env := tcpEnv(t)
	const idle = 300 * time.Millisecond
	r := startTCP(t, env, TCPLimits{IdleTimeout: idle})

	c := r.dial(t, serverAddr)
	ask(t, c, 1)
	start := time.Now()
	if !closedByServer(c, 3*idle) {
		t.Fatal("an idle connection stayed open past its idle timeout")
	}
	if took := time.Since(start); took < idle-50*time.Millisecond {
		t.Errorf("closed after %s idle, timeout %s", took, idle)
	}
	waitFor(t, "the idle timeout counted", time.Second, func() bool { return r.events.idle.Load() == 1 })

	// A trickler: one byte, then nothing.
	c = r.dial(t, serverAddr)
	if _, err := c.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if !closedByServer(c, tcpIOTimeout+time.Second) {
		t.Fatal("a connection with a query cut short stayed open")
	}
	if took := time.Since(start); took < tcpIOTimeout-100*time.Millisecond {
		t.Errorf("a started query was cut after %s, want %s", took, tcpIOTimeout)
	}
	if n := r.events.idle.Load(); n != 1 {
		t.Errorf("%d idle timeouts counted, want 1: a connection reading a query is not idle", n)
	}
}
