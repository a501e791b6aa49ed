package fallback

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/testenv"
)

// The TCP tests serve on the edge host of a test environment and connect
// from the edge itself, from 198.18.0.2 and from 198.18.9.2 (a second
// client prefix, on the edge's loopback).

var (
	serverAddr = netip.MustParseAddr("198.18.0.2")
	otherAddr  = netip.MustParseAddr("198.18.9.2")
)

type tcpEvents struct {
	opened, closed, idle, evicted, busy, lifetime, queries, handshakes atomic.Int64
}

func (e *tcpEvents) observe(ev TCPEvent) {
	map[TCPEvent]*atomic.Int64{TCPOpened: &e.opened, TCPClosed: &e.closed, TCPIdleTimeout: &e.idle, TCPEvicted: &e.evicted,
		TCPEvictedBusy: &e.busy, TCPLifetime: &e.lifetime, TCPQueryLimit: &e.queries, TCPHandshakeFailed: &e.handshakes}[ev].Add(1)
}

func (e *tcpEvents) open() int64 { return e.opened.Load() - e.closed.Load() }

type tcpRig struct {
	env    *testenv.Env
	s      *Server
	addr   netip.AddrPort
	events *tcpEvents
	// replies counts the outcomes observed: replies built.
	replies atomic.Int64
	tlsAddr netip.AddrPort // DNS over TLS's, with startTCPWith
	// tapped counts the queries handed to Options.Tap by transport,
	// with startTCPWith's TLS.
	tapped [OverTLS + 1]atomic.Int64
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
	return startTCPView(t, env, lim, v)
}

// startTCPView is startTCP serving v.
func startTCPView(t *testing.T, env *testenv.Env, lim TCPLimits, v *View) *tcpRig {
	t.Helper()
	return startTCPWith(t, env, lim, v, nil)
}

// startTCPWith is startTCPView that also serves DNS over TLS with conf,
// unless it is nil, at r.tlsAddr.
func startTCPWith(t *testing.T, env *testenv.Env, lim TCPLimits, v *View, conf *tls.Config) *tcpRig {
	t.Helper()
	r := &tcpRig{env: env, events: &tcpEvents{}}
	opts := Options{Listen: []netip.AddrPort{netip.AddrPortFrom(serverAddr, 0)}, TCP: lim, OnTCP: r.events.observe,
		Observe: func(string, time.Duration) { r.replies.Add(1) }}
	if conf != nil {
		opts.TLS = &TLSOptions{Listen: []netip.AddrPort{netip.AddrPortFrom(serverAddr, 0)}, Config: conf}
		opts.Tap = func(_, _ []byte, _, _ netip.AddrPort, over Transport, _, _ time.Time) { r.tapped[over].Add(1) }
	}
	r.s = New(opts, v)
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
	if conf != nil {
		r.tlsAddr = r.s.Addrs()[2].(*net.TCPAddr).AddrPort()
	}
	return r
}

// dial connects from src.
func (r *tcpRig) dial(t *testing.T, src netip.Addr) *net.TCPConn {
	t.Helper()
	return r.dialTo(t, src, r.addr)
}

// dialTo connects from src to addr, one of the server's.
func (r *tcpRig) dialTo(t *testing.T, src netip.Addr, addr netip.AddrPort) *net.TCPConn {
	t.Helper()
	var c net.Conn
	err := r.env.Edge.Do(func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}
		c, err = d.Dial("tcp", addr.String())
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

// allIdle reports whether every connection the server holds waits for a
// query.
func (r *tcpRig) allIdle() bool {
	t := r.s.tcp
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := t.served.Front(); e != nil; e = e.Next() {
		if e.Value.(*tcpConn).busy {
			return false
		}
	}
	return true
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
		return r.events.opened.Load() == clients
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
// closes that prefix's connection answered the least recently, idle or
// reading a query, and another prefix is served throughout.
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
	// A client has its reply before the server marks the connection
	// idle again; the eviction below is counted by that mark.
	waitFor(t, "the answered connections to be idle", 5*time.Second, r.allIdle)

	fourth := r.dial(t, serverAddr)
	ask(t, fourth, 3)
	if !closedByServer(mine[0], 5*time.Second) {
		t.Fatal("the prefix's least recently answered connection stayed open past its limit")
	}
	for _, c := range mine[1:] {
		ask(t, c, 4)
	}
	ask(t, other, 11)
	if n := r.events.evicted.Load(); n != 1 {
		t.Errorf("%d idle connections closed to admit others, want 1", n)
	}

	// The first byte of a query each: all three are reading one, none is
	// idle, and fourth was answered the least recently.
	q := tcpQuery(t, 5)
	for _, c := range append(mine[1:], fourth) {
		if _, err := c.Write(q[:1]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	ask(t, r.dial(t, serverAddr), 6)
	if !closedByServer(fourth, 5*time.Second) {
		t.Fatal("the prefix's least recently answered connection, reading a query, stayed open past its limit")
	}
	if n := r.events.busy.Load(); n != 1 {
		t.Errorf("%d connections reading a query closed to admit others, want 1", n)
	}
	// The others finish their queries.
	for _, c := range mine[1:] {
		if _, err := c.Write(q[1:]); err != nil {
			t.Fatal(err)
		}
		if got, err := readReply(c, 2*time.Second); err != nil || got != 5 {
			t.Fatalf("reply %d, %v; want reply 5", got, err)
		}
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
	// A half-close: a reset, which closing with the last two queries
	// unread would send, can destroy replies the client has not read.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after MaxQueries replies a read ends in %v, want EOF", err)
	}
	waitFor(t, "the query limit counted", 5*time.Second, func() bool { return r.events.queries.Load() == 1 })
}

// TestTCPPipelinedAsUDP sends queries of every kind pipelined, more than
// the old default of 128 per connection and more than one read takes,
// one of them larger than a read's room: in one write, and cut at random
// into writes of 1 to 300 bytes, so that reads end inside a length or a
// message. Every reply comes back in order, byte for byte the UDP path's
// to the same query: the fast path's and the handler's alike.
func TestTCPPipelinedAsUDP(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{})
	asked := []struct {
		name  string
		qtype uint16
	}{
		{"static.example.test.", dns.TypeA}, {"mail.example.test.", dns.TypeAAAA}, {"web.example.test.", dns.TypeA},
		{"web6.example.test.", dns.TypeAAAA}, {"example.test.", dns.TypeMX}, {"nothere.example.test.", dns.TypeA},
		{"alias.example.test.", dns.TypeA}, {"down.example.test.", dns.TypeA}, {"fail.example.test.", dns.TypeA},
		{"x.wild.example.test.", dns.TypeA}, {"STATIC.Example.TEST.", dns.TypeA},
	}
	rnd := rand.New(rand.NewPCG(7, 28))
	for _, cut := range []bool{false, true} {
		c := r.dial(t, serverAddr)
		client := c.LocalAddr().(*net.TCPAddr).AddrPort()
		var burst []byte
		var want [][]byte
		for i := range 400 {
			a := asked[i%len(asked)]
			m := query(a.name, a.qtype)
			m.Id = uint16(i)
			if i%2 == 1 {
				m.SetEdns0(1232, i%4 == 1)
			}
			if i == 201 {
				m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_PADDING{Padding: make([]byte, 3*tcpRead/2)}}
			}
			raw := pack(t, m)
			want = append(want, r.s.AnswerDatagram(raw, client))
			burst = binary.BigEndian.AppendUint16(burst, uint16(len(raw)))
			burst = append(burst, raw...)
		}
		go func() {
			for len(burst) > 0 {
				n := len(burst)
				if cut {
					n = min(n, 1+rnd.IntN(300))
				}
				if _, err := c.Write(burst[:n]); err != nil {
					t.Error(err)
					return
				}
				burst = burst[n:]
				if cut && rnd.IntN(4) == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i, w := range want {
			var n [2]byte
			if _, err := io.ReadFull(c, n[:]); err != nil {
				t.Fatalf("cut %v, reply %d: %v", cut, i, err)
			}
			got := make([]byte, binary.BigEndian.Uint16(n[:]))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("cut %v, reply %d: %v", cut, i, err)
			}
			if !bytes.Equal(got, w) {
				var gm, wm dns.Msg
				gm.Unpack(got)
				wm.Unpack(w)
				t.Fatalf("cut %v, reply %d over TCP:\n%v\nover UDP:\n%v", cut, i, &gm, &wm)
			}
		}
		ask(t, c, 1000)
	}
}

// TestTCPLargeRepliesUnread: clients that pipeline a read's worth of
// queries for a 52 KB answer each and read no reply hold the server to
// one write's worth of replies a connection (tcpWrite, and the answer
// that crossed it), not one reply per query read: 40 such connections
// would hold 250 MB.
func TestTCPLargeRepliesUnread(t *testing.T) {
	env := tcpEnv(t)
	var zf strings.Builder
	zf.WriteString("$TTL 300\n@ SOA ns1 hostmaster 1 7200 900 1209600 300\n@ NS ns1\nns1 A 198.18.0.53\n")
	for i := range 200 {
		fmt.Fprintf(&zf, "big TXT \"%03d%s\"\n", i, strings.Repeat("x", 240))
	}
	path := filepath.Join(t.TempDir(), "large.test.zone")
	if err := os.WriteFile(path, []byte(zf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := zone.Load("large.test.", path)
	if err != nil {
		t.Fatal(err)
	}
	r := startTCPView(t, env, TCPLimits{}, &View{Zones: zone.NewZones(z)})
	one := query("big.large.test.", dns.TypeTXT)
	if err := env.Edge.Do(func() error {
		m, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(one, r.addr.String())
		if err == nil && (len(m.Answer) != 200 || m.Len() < 50_000) {
			err = fmt.Errorf("%d records in %d bytes, want 200 in over 50,000", len(m.Answer), m.Len())
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var burst []byte
	for len(burst) < tcpRead {
		raw := pack(t, one)
		burst = binary.BigEndian.AppendUint16(burst, uint16(len(raw)))
		burst = append(burst, raw...)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 40 {
		if _, err := r.dial(t, serverAddr).Write(burst); err != nil {
			t.Fatal(err)
		}
	}
	// Until every connection has built what it can before its write
	// blocks on the unread replies: the count of replies stops moving.
	for last := int64(-1); ; {
		time.Sleep(300 * time.Millisecond)
		n := r.replies.Load()
		if n == last && n >= 40 {
			break
		}
		last = n
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
		t.Errorf("the heap grew by %d MB for 40 connections that read no reply, want under 64", grown>>20)
	}
}

// TestTCPKeepalive: a query over TCP that carries edns-tcp-keepalive gets
// the idle timeout back in units of 100 ms (RFC 7828), from the fast path
// and the handler alike; over UDP, and without the option, it gets none.
func TestTCPKeepalive(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{IdleTimeout: 7 * time.Second})
	for _, c := range []struct {
		net   string
		qtype uint16
		ask   bool
		want  uint16 // the TIMEOUT; 0 for no option
	}{
		{"tcp", dns.TypeA, true, 70}, {"tcp", dns.TypeMX, true, 70}, {"tcp", dns.TypeA, false, 0},
		{"udp", dns.TypeA, true, 0}, {"udp", dns.TypeMX, true, 0},
	} {
		m := query("static.example.test.", c.qtype)
		if c.qtype == dns.TypeMX {
			m = query("example.test.", c.qtype)
		}
		m.SetEdns0(1232, false)
		if c.ask {
			withKeepalive(m)
		}
		var got *dns.Msg
		err := env.Edge.Do(func() (err error) {
			got, _, err = (&dns.Client{Net: c.net, Timeout: 2 * time.Second}).Exchange(m, r.addr.String())
			return err
		})
		if err != nil {
			t.Fatalf("%s %s: %v", c.net, dns.TypeToString[c.qtype], err)
		}
		var timeout uint16
		if opt := got.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if k, ok := o.(*dns.EDNS0_TCP_KEEPALIVE); ok {
					timeout = k.Timeout
				}
			}
		}
		if timeout != c.want || len(got.Answer) == 0 {
			t.Errorf("%s %s, keepalive asked %v: TIMEOUT %d and %d answers, want %d and answers", c.net, dns.TypeToString[c.qtype], c.ask, timeout, len(got.Answer), c.want)
		}
	}
}

// TestTCPQueryLimit: a client asking one query after another is answered
// MaxQueries times, then the server closes the connection.
func TestTCPQueryLimit(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{MaxQueries: 4})
	c := r.dial(t, serverAddr)
	for id := range uint16(4) {
		ask(t, c, id)
	}
	if !closedByServer(c, 5*time.Second) {
		t.Fatal("the connection stayed open after MaxQueries replies")
	}
	waitFor(t, "the query limit counted", 5*time.Second, func() bool { return r.events.queries.Load() == 1 })
	if n := r.events.idle.Load() + r.events.lifetime.Load(); n != 0 {
		t.Errorf("%d connections closed for idling or age, want 0", n)
	}
}

// TestTCPLifetime: a connection busy with query after query still closes
// at MaxLifetime, waiting for its next query, after its reply.
func TestTCPLifetime(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{MaxLifetime: 300 * time.Millisecond, IdleTimeout: time.Minute})
	c := r.dial(t, serverAddr)
	answered := 0
	for id := uint16(0); ; id++ {
		if id == 1000 {
			t.Fatal("the connection stayed open past its lifetime")
		}
		if _, err := c.Write(tcpQuery(t, id)); err != nil {
			break
		}
		got, err := readReply(c, 2*time.Second)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("after %d replies: %v; want the server to close the connection", answered, err)
			}
			break
		}
		if got != id {
			t.Fatalf("reply %d, want %d", got, id)
		}
		answered++
		time.Sleep(20 * time.Millisecond)
	}
	if answered == 0 {
		t.Error("no query answered before the lifetime ended")
	}
	waitFor(t, "the lifetime counted", 5*time.Second, func() bool { return r.events.lifetime.Load() == 1 })
	if n := r.events.idle.Load() + r.events.queries.Load(); n != 0 {
		t.Errorf("%d connections closed for idling or queries, want 0", n)
	}
}

// TestTCPLifetimePipelined: a client that always has a query on the way,
// the next one's first byte sent with each burst, is never idle, and is
// still closed at MaxLifetime after a batch's replies, with a half-close
// the client reads as the end.
func TestTCPLifetimePipelined(t *testing.T) {
	env := tcpEnv(t)
	r := startTCP(t, env, TCPLimits{MaxLifetime: 300 * time.Millisecond, IdleTimeout: time.Minute})
	c := r.dial(t, serverAddr)
	var id, replies uint16
	var rest []byte // of the query whose first byte went last
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		burst := rest
		for range 10 {
			burst = append(burst, tcpQuery(t, id)...)
			id++
		}
		next := tcpQuery(t, id)
		id++
		burst, rest = append(burst, next[0]), next[1:]
		if _, err := c.Write(burst); err != nil {
			t.Fatalf("after %d replies: %v", replies, err)
		}
		for ; replies < id-1; replies++ {
			got, err := readReply(c, 2*time.Second)
			if errors.Is(err, io.EOF) {
				waitFor(t, "the lifetime counted", 5*time.Second, func() bool { return r.events.lifetime.Load() == 1 })
				return
			}
			if err != nil || got != replies {
				t.Fatalf("reply %d, %v; want reply %d", got, err, replies)
			}
		}
	}
	t.Fatal("the connection stayed open past its lifetime")
}

// TestTCPTricklers fills the table with clients from 20 prefixes that
// trickle each query in, a byte at a time within the I/O bound, so none
// is ever idle, and that come back when closed: more of them than the
// table has room for. A new client is still answered within a second,
// each time.
func TestTCPTricklers(t *testing.T) {
	const slots, prefixes, perPrefix = 32, 20, 2
	env := tcpEnv(t)
	var srcs []netip.Addr
	for i := range prefixes {
		a := netip.AddrFrom4([4]byte{198, 18, byte(10 + i), 2})
		if out, err := env.Edge.Command("ip", "addr", "add", a.String()+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("adding %s: %v: %s", a, err, out)
		}
		srcs = append(srcs, a)
	}
	r := startTCP(t, env, TCPLimits{MaxConnections: slots, IdleTimeout: time.Minute})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	q := tcpQuery(t, 1)
	var answered atomic.Int64
	// A byte every 20 ms: each query takes the trickler under a second,
	// half the I/O bound, so the server answers it.
	const pace = 20 * time.Millisecond
	trickle := func(src netip.Addr) {
		defer wg.Done()
		for {
			var c net.Conn
			err := r.env.Edge.Do(func() (err error) {
				d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}
				c, err = d.Dial("tcp", r.addr.String())
				return err
			})
			for err == nil {
				// The first byte at once after the last reply, so the
				// connection is not idle in between.
				for i := range q {
					if i > 0 {
						select {
						case <-stop:
							c.Close()
							return
						case <-time.After(pace):
						}
					}
					if _, err = c.Write(q[i : i+1]); err != nil {
						break
					}
				}
				if err == nil {
					if _, err = readReply(c, 5*time.Second); err == nil {
						answered.Add(1)
					}
				}
			}
			if c != nil {
				c.Close()
			}
			// Back after a pause, as an attacker whose connection was
			// closed: without one the clients would take turns closing
			// each other as fast as they connect.
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	for _, src := range srcs {
		for range perPrefix {
			wg.Add(1)
			go trickle(src)
		}
	}
	// The table full of tricklers: more trickled queries answered than it
	// has room for, each taking longer than all of them took to connect.
	waitFor(t, "the table to fill with tricklers", 20*time.Second, func() bool { return answered.Load() > slots })

	for id := range uint16(3) {
		start := time.Now()
		deadline := start.Add(time.Second)
		var c net.Conn
		err := env.Edge.Do(func() (err error) {
			d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(otherAddr, 0)), Deadline: deadline}
			c, err = d.Dial("tcp", r.addr.String())
			return err
		})
		if err != nil {
			t.Fatalf("new client %d: %v", id, err)
		}
		c.SetDeadline(deadline)
		if _, err := c.Write(tcpQuery(t, id)); err != nil {
			t.Fatalf("new client %d: %v", id, err)
		}
		got, err := readReply(c, time.Until(deadline))
		if err != nil || got != id {
			t.Fatalf("new client %d: reply %d, %v after %s; want its reply within a second", id, got, err, time.Since(start))
		}
		c.Close()
		if n := r.events.open(); n > slots {
			t.Errorf("%d connections open, limit %d", n, slots)
		}
	}
	if r.events.busy.Load() == 0 {
		t.Error("no connection reading a query was closed to make room")
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

// TestClientPrefix: the prefixes MaxPerPrefix counts, a /24 for IPv4 (a
// mapped address too) and a /48 for IPv6.
func TestClientPrefix(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"198.18.5.1", "198.18.5.200"},
		{"::ffff:198.18.5.1", "198.18.5.7"},
		{"fd53:1:2::1", "fd53:1:2:ff00::1"},
	} {
		if a, b := clientPrefix(netip.MustParseAddr(c.a)), clientPrefix(netip.MustParseAddr(c.b)); a != b {
			t.Errorf("%s is in %s, %s in %s: want one prefix", c.a, a, c.b, b)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"198.18.5.1", "198.18.6.1"},
		{"fd53:1:2::1", "fd53:1:3::1"},
	} {
		if a, b := clientPrefix(netip.MustParseAddr(c.a)), clientPrefix(netip.MustParseAddr(c.b)); a == b {
			t.Errorf("%s and %s are both in %s: want two prefixes", c.a, c.b, a)
		}
	}
}
