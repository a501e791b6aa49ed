package fallback

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// TestUDPBatches sends a burst of queries faster than one is answered, so
// the server reads and writes them in batches, and wants each answered
// exactly once, under its own ID, with the right answer.
func TestUDPBatches(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	c, err := net.Dial("udp", ts.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Bursts of 64, each sent before the first reply is read: within the
	// socket's receive buffer, and more than one batch.
	const burst, n = 64, 512
	// Outcomes are observed before each write: drain them as they come.
	observed := make(chan int)
	go func() {
		k := 0
		for k < n {
			select {
			case <-ts.outcomes:
				k++
			case <-time.After(5 * time.Second):
				observed <- k
				return
			}
		}
		observed <- k
	}()
	seen := make([]bool, n)
	buf := make([]byte, 65535)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for first := 0; first < n; first += burst {
		for i := first; i < first+burst; i++ {
			q := query("static.example.test.", dns.TypeA)
			if i%2 == 1 {
				q = query("nowhere.example.test.", dns.TypeA)
			}
			q.Id = uint16(i)
			if _, err := c.Write(pack(t, q)); err != nil {
				t.Fatal(err)
			}
		}
		for got := 0; got < burst; got++ {
			k, err := c.Read(buf)
			if err != nil {
				t.Fatalf("burst at %d, after %d replies: %v", first, got, err)
			}
			var r dns.Msg
			if err := r.Unpack(buf[:k]); err != nil {
				t.Fatal(err)
			}
			if int(r.Id) < first || int(r.Id) >= first+burst || seen[r.Id] {
				t.Fatalf("reply with ID %d twice or unasked", r.Id)
			}
			seen[r.Id] = true
			want := dns.RcodeSuccess
			if r.Id%2 == 1 {
				want = dns.RcodeNameError
			}
			if r.Rcode != want || r.Id%2 == 0 && len(r.Answer) != 2 {
				t.Fatalf("reply %d: %v", r.Id, &r)
			}
		}
	}
	if k := <-observed; k != n {
		t.Errorf("%d outcomes observed for %d replies", k, n)
	}
}

// TestUDPWildcardSource: a server bound to a wildcard address replies from
// the address each query was sent to, or a connected client drops the
// reply. On loopback a reply to 127.0.0.2 would otherwise leave from
// 127.0.0.1.
func TestUDPWildcardSource(t *testing.T) {
	v, _ := exampleView(t)
	for _, tc := range []struct{ bind, to string }{{"0.0.0.0:0", "127.0.0.2"}, {"[::]:0", "127.0.0.3"}} {
		s := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort(tc.bind)}}, v)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		port := s.Addrs()[0].(*net.UDPAddr).Port
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(tc.to), uint16(port))))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write(pack(t, query("static.example.test.", dns.TypeA)))
		buf := make([]byte, 512)
		k, from, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Errorf("bound to %s, asked %s: %v", tc.bind, tc.to, err)
		} else if got := from.AddrPort().Addr().Unmap().String(); got != tc.to || k < headerLen {
			t.Errorf("bound to %s: reply of %d bytes from %s, want from %s", tc.bind, k, got, tc.to)
		}
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		cancel()
	}
}

// TestUDPv6 serves a socket bound to an IPv6 address, which reads and
// writes through ipv6.PacketConn.
func TestUDPv6(t *testing.T) {
	v, _ := exampleView(t)
	s := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("[::1]:0")}}, v)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	c, err := net.Dial("udp", s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	c.Write(pack(t, query("static.example.test.", dns.TypeA)))
	buf := make([]byte, 512)
	k, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var r dns.Msg
	if err := r.Unpack(buf[:k]); err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
		t.Errorf("reply %v, %v", &r, err)
	}
}

// TestUDPReplyPackedInPlace wants a reply packed into the batch slot's own
// buffer: miekg/dns allocates a new one unless the buffer's length holds
// the message, which cost an allocation per query under load.
func TestUDPReplyPackedInPlace(t *testing.T) {
	v, _ := exampleView(t)
	s := New(Options{}, v)
	remote := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.10:5300"))
	buf := make([]byte, 0, replyBuf)
	w := &replyWriter{local: remote, remote: remote, buf: buf}
	s.serveUDP(w, pack(t, query("static.example.test.", dns.TypeA)))
	if len(w.reply) == 0 {
		t.Fatal("no reply")
	}
	if &w.reply[0] != &buf[:1][0] {
		t.Error("the reply was packed into a new buffer, not the slot's")
	}
}

// TestUDPScratchReuse answers a sequence of queries through one writer, as
// a UDP loop does, and wants each reply byte for byte what a fresh writer
// gives: a reply built in memory the previous one used must not keep any
// of it.
func TestUDPScratchReuse(t *testing.T) {
	v, _ := exampleView(t)
	s := New(Options{}, v)
	remote := netip.MustParseAddrPort("198.18.0.10:5300")
	w := &replyWriter{remote: net.UDPAddrFromAddrPort(remote), buf: make([]byte, 0, replyBuf)}
	for i, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.example.test.", dns.TypeA},
		{"web6.example.test.", dns.TypeAAAA},
		{"geo.example.test.", dns.TypeA},
		{"down.example.test.", dns.TypeA},
		{"web.example.test.", dns.TypeA},
		{"static.example.test.", dns.TypeA},
		{"web6.example.test.", dns.TypeAAAA},
		{"nope.example.test.", dns.TypeA},
		{"geo.example.test.", dns.TypeA},
	} {
		m := query(q.name, q.qtype)
		m.Id = uint16(i + 1)
		raw := pack(t, m)
		w.reply, w.buf = nil, w.buf[:0]
		s.serveUDP(w, raw)
		want := s.AnswerDatagram(raw, remote)
		if string(w.reply) != string(want) {
			t.Errorf("query %d (%s %s): reply through a reused writer differs from a fresh one's:\n%x\n%x",
				i, q.name, dns.TypeToString[q.qtype], w.reply, want)
		}
	}
}

// TestUDPReceiveBuffer: each UDP socket holds udpRcvBuf of queued
// datagrams (the kernel reports twice what was set), past
// net.core.rmem_max (208 KiB by default), so that bursts delivered while
// the loop waits for the CPU are not dropped, and no more, so that under
// overload a query does not wait tens of milliseconds. Only root may pass
// rmem_max.
func TestUDPReceiveBuffer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_RCVBUFFORCE needs root")
	}
	v, _ := exampleView(t)
	ts := start(t, v)
	if len(ts.s.udp) == 0 {
		t.Fatal("no UDP socket")
	}
	for _, u := range ts.s.udp {
		got, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		if err != nil {
			t.Fatal(err)
		}
		if got != 2*udpRcvBuf {
			t.Errorf("receive buffer of %d bytes, want %d", got, 2*udpRcvBuf)
		}
	}
}

// TestUDPWaitLetsGCStop: while the UDP loops wait in recvmmsg, a raw
// call that keeps the goroutine running as far as Go knows, a collection
// still stops the world at once: the preemption signal interrupts the
// wait (the socket's receive timeout makes it EINTR, not a restart) and
// the loop yields. Without that, each collection would wait for a datagram
// or the timeout, udpWait.
func TestUDPWaitLetsGCStop(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	lengthenWaits(t, ts.s)
	var worst, total time.Duration
	const n = 50
	for range n {
		t0 := time.Now()
		runtime.GC()
		d := time.Since(t0)
		total += d
		worst = max(worst, d)
		if d > longWait/10 {
			break // each collection would wait as long
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d collections with %d UDP loops waiting: mean %v, worst %v", n, len(ts.s.udp), total/n, worst)
	if worst > longWait/10 {
		t.Errorf("a collection took %v with the loops waiting, want well under the wait's timeout (%v)", worst, longWait)
	}
}

// longWait is a receive timeout no test waits out: a stop that waited
// for the loops' wait to end would take it, and a loaded machine's delay
// does not come near it.
const longWait = time.Minute

// lengthenWaits gives s's UDP sockets longWait as their receive timeout
// and waits for each loop's current wait, of udpWait, to end, so that the
// loops wait longWait from then on. A timeout of its own is what makes a
// signal end the wait, so each socket must have had one.
func lengthenWaits(t *testing.T, s *Server) {
	t.Helper()
	tv := unix.NsecToTimeval(longWait.Nanoseconds())
	for _, u := range s.udp {
		had, err := unix.GetsockoptTimeval(u.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO)
		if err != nil {
			t.Fatal(err)
		}
		if had.Nano() == 0 {
			t.Fatalf("udp %s: no receive timeout, want %v", u.local, udpWait)
		}
		if err := unix.SetsockoptTimeval(u.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * udpWait)
}

// TestUDPCloseWakesLoop: Shutdown stops loops that wait for a datagram at
// once, not after their wait times out, and a query sent afterwards goes
// unanswered.
func TestUDPCloseWakesLoop(t *testing.T) {
	v, _ := exampleView(t)
	s := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}, v)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addrs()[0].String()
	lengthenWaits(t, s)
	t0 := time.Now()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > longWait/10 {
		t.Errorf("Shutdown took %v with the loops waiting, want well under the wait's timeout (%v)", took, longWait)
	}
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	if r, _, err := c.Exchange(query("static.example.test.", dns.TypeA), addr); err == nil {
		t.Errorf("answered after Shutdown: %v", r)
	}
	// A second Shutdown finds nothing to close, and no descriptor reused
	// since is closed by mistake.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestUDPLeavesAProc: each loop holds a P while it waits, so however many
// servers and listen addresses run, GOMAXPROCS keeps a P per CPU beside
// the loops, and
// the rest of the process still runs at once: a timer fires on time and a
// goroutine gets to run.
func TestUDPLeavesAProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	v, _ := exampleView(t)
	var servers []*Server
	for range 3 {
		s := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0"), netip.MustParseAddrPort("[::1]:0")}}, v)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	defer func() {
		for _, s := range servers {
			s.Shutdown(context.Background())
		}
	}()
	loops := 0
	for _, s := range servers {
		loops += len(s.udp)
	}
	if procs := runtime.GOMAXPROCS(0); procs < loops+runtime.NumCPU() {
		t.Errorf("GOMAXPROCS %d with %d UDP loops on %d CPUs, want a P per CPU beside the loops", procs, loops, runtime.NumCPU())
	}
	time.Sleep(50 * time.Millisecond)
	var worst, total time.Duration
	const n = 20
	for range n {
		t0 := time.Now()
		done := make(chan struct{})
		go func() { close(done) }()
		<-done
		time.Sleep(time.Millisecond)
		late := time.Since(t0) - time.Millisecond
		total += late
		worst = max(worst, late)
	}
	t.Logf("%d loops, GOMAXPROCS %d: a goroutine and a 1 ms sleep late by %v on average, %v at worst", loops, runtime.GOMAXPROCS(0), total/n, worst)
	// Without a free P they would wait for a loop's preemption or its
	// timeout; the mean, so that a loaded machine's stray delay does not
	// decide.
	if mean := total / n; mean > udpWait/5 {
		t.Errorf("a goroutine and a timer waited %v on average (worst %v) beyond their time with the loops waiting", mean, worst)
	}
}
