package fallback

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// TCPLimits bound what TCP clients can hold of the server: connections,
// and through them file descriptors, goroutines and buffers. A zero field
// takes its value from DefaultTCPLimits.
type TCPLimits struct {
	// MaxConnections is the most connections open at once, from all
	// clients.
	MaxConnections int
	// MaxPerPrefix is the most connections open at once from one client
	// prefix: a /24 for IPv4, a /56 for IPv6.
	MaxPerPrefix int
	// IdleTimeout closes a connection that has no query in progress for
	// this long.
	IdleTimeout time.Duration
	// MaxQueries is the most queries one connection is answered in its
	// lifetime; the server closes it after the last reply, as NSD's
	// tcp-query-count. Queries on a connection are answered one at a
	// time, in order, so what a client pipelines beyond the one in hand
	// waits in the kernel's receive buffer and costs the server nothing.
	MaxQueries int
}

// DefaultTCPLimits: BIND's and NSD's connection counts are in the
// hundreds and Knot's idle timeout is 10 s; 128 queries per connection is
// what miekg/dns allows by default.
var DefaultTCPLimits = TCPLimits{MaxConnections: 1024, MaxPerPrefix: 64, IdleTimeout: 10 * time.Second, MaxQueries: 128}

// WithDefaults returns l with every zero field set from DefaultTCPLimits.
func (l TCPLimits) WithDefaults() TCPLimits {
	d := DefaultTCPLimits
	if l.MaxConnections == 0 {
		l.MaxConnections = d.MaxConnections
	}
	if l.MaxPerPrefix == 0 {
		l.MaxPerPrefix = d.MaxPerPrefix
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxQueries == 0 {
		l.MaxQueries = d.MaxQueries
	}
	return l
}

// tcpIOTimeout bounds a message once its first byte has arrived, and the
// write of a reply: a client that trickles a query or does not read its
// replies holds its connection this long at most. It is miekg/dns's
// default read and write timeout.
const tcpIOTimeout = 2 * time.Second

// Client prefixes for MaxPerPrefix: what one site or one customer of a
// provider usually holds, as response rate limiting groups clients.
const (
	tcpPrefix4 = 24
	tcpPrefix6 = 56
)

// TCPEvent is something that happened to a TCP connection, for
// Options.OnTCP.
type TCPEvent int

const (
	TCPOpened  TCPEvent = iota // accepted and served
	TCPClosed                  // closed, for any reason, after TCPOpened
	TCPRefused                 // closed as accepted: the limit was reached and no connection was idle
	// TCPIdleTimeout and TCPEvicted each precede the TCPClosed of a
	// connection closed while idle: for IdleTimeout, or to make room for
	// a new one.
	TCPIdleTimeout
	TCPEvicted
)

// tcpTable holds the open connections of every TCP listener of a server,
// so the limits hold across listen addresses.
type tcpTable struct {
	s   *Server
	lim TCPLimits

	mu       sync.Mutex
	conns    map[*tcpConn]struct{}
	idle     list.List // *tcpConn, the longest idle first
	prefixes map[netip.Prefix]*prefixConns
	closing  bool

	listeners []*net.TCPListener
	wg        sync.WaitGroup // accept loops and connections
}

// prefixConns are the connections of one client prefix.
type prefixConns struct {
	n    int
	idle list.List // *tcpConn, the longest idle first
}

type tcpConn struct {
	c      *net.TCPConn
	prefix netip.Prefix
	// idleAt and prefixIdleAt are the connection's places in the idle
	// lists while it waits for a query; nil while it reads or answers
	// one.
	idleAt, prefixIdleAt *list.Element
	gone                 bool // out of the table: closed or being closed
}

func newTCPTable(s *Server, lim TCPLimits) *tcpTable {
	return &tcpTable{s: s, lim: lim.WithDefaults(), conns: map[*tcpConn]struct{}{}, prefixes: map[netip.Prefix]*prefixConns{}}
}

func clientPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := tcpPrefix6
	if a.Is4() {
		bits = tcpPrefix4
	}
	p, _ := a.Prefix(bits)
	return p
}

// serve accepts on ln until it closes.
func (t *tcpTable) serve(ln *net.TCPListener) {
	t.listeners = append(t.listeners, ln)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		var pause time.Duration
		for {
			c, err := ln.AcceptTCP()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				// Out of file descriptors or memory: the connection
				// waits in the backlog until one is freed. Pausing keeps
				// the loop from spinning meanwhile.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			pause = 0
			t.admit(c)
		}
	}()
}

// admit serves c if the limits allow it, after closing the longest idle
// connection (of c's prefix when that prefix is full) if they are reached;
// it refuses c when none is idle.
func (t *tcpTable) admit(c *net.TCPConn) {
	tc := &tcpConn{c: c, prefix: clientPrefix(c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr())}
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		c.Close()
		return
	}
	pc := t.prefixes[tc.prefix]
	var victims *list.List
	switch {
	case pc != nil && pc.n >= t.lim.MaxPerPrefix:
		victims = &pc.idle
	case len(t.conns) >= t.lim.MaxConnections:
		victims = &t.idle
	}
	var victim *tcpConn
	if victims != nil {
		if victims.Len() == 0 {
			t.mu.Unlock()
			// Counted first, so whoever sees the close sees it counted.
			t.s.opts.OnTCP(TCPRefused)
			// A reset, so the refused connection leaves no TIME_WAIT
			// behind on the server either.
			c.SetLinger(0)
			c.Close()
			return
		}
		victim = victims.Front().Value.(*tcpConn)
		t.removeLocked(victim)
	}
	if pc == nil {
		pc = &prefixConns{}
		t.prefixes[tc.prefix] = pc
	}
	pc.n++
	t.conns[tc] = struct{}{}
	t.idleLocked(tc, pc)
	t.wg.Add(1)
	t.mu.Unlock()
	if victim != nil {
		t.s.opts.OnTCP(TCPEvicted)
		// Its goroutine sees the read fail and reports it closed.
		victim.c.Close()
	}
	t.s.opts.OnTCP(TCPOpened)
	go t.serveConn(tc)
}

func (t *tcpTable) idleLocked(tc *tcpConn, pc *prefixConns) {
	tc.idleAt = t.idle.PushBack(tc)
	tc.prefixIdleAt = pc.idle.PushBack(tc)
}

func (t *tcpTable) busyLocked(tc *tcpConn) {
	if tc.idleAt != nil {
		t.idle.Remove(tc.idleAt)
		t.prefixes[tc.prefix].idle.Remove(tc.prefixIdleAt)
		tc.idleAt, tc.prefixIdleAt = nil, nil
	}
}

func (t *tcpTable) removeLocked(tc *tcpConn) {
	if tc.gone {
		return
	}
	tc.gone = true
	t.busyLocked(tc)
	delete(t.conns, tc)
	pc := t.prefixes[tc.prefix]
	if pc.n--; pc.n == 0 {
		delete(t.prefixes, tc.prefix)
	}
}

// busy marks tc as reading a query; false if it was closed meanwhile.
func (t *tcpTable) busy(tc *tcpConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busyLocked(tc)
	return !tc.gone
}

// idleAgain marks tc as waiting for a query; false if it was closed
// meanwhile or the server is shutting down.
func (t *tcpTable) idleAgain(tc *tcpConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc.gone || t.closing {
		return false
	}
	t.idleLocked(tc, t.prefixes[tc.prefix])
	return true
}

// serveConn answers tc's queries in order until the client closes, a
// limit closes it, or the server shuts down.
func (t *tcpTable) serveConn(tc *tcpConn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		t.removeLocked(tc)
		t.mu.Unlock()
		tc.c.Close()
		t.s.opts.OnTCP(TCPClosed)
	}()
	w := &tcpWriter{conn: tc.c}
	var hdr [2]byte
	for range t.lim.MaxQueries {
		tc.c.SetReadDeadline(time.Now().Add(t.lim.IdleTimeout))
		n, err := tc.c.Read(hdr[:])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && t.busy(tc) {
				t.s.opts.OnTCP(TCPIdleTimeout)
			}
			return
		}
		if !t.busy(tc) {
			return
		}
		tc.c.SetReadDeadline(time.Now().Add(tcpIOTimeout))
		if _, err := io.ReadFull(tc.c, hdr[n:]); err != nil {
			return
		}
		// Allocated per message and let go after the reply: a connection
		// waiting for its next query holds no buffer.
		msg := make([]byte, binary.BigEndian.Uint16(hdr[:]))
		if _, err := io.ReadFull(tc.c, msg); err != nil {
			return
		}
		t.s.serveMsg(w, msg)
		if w.err != nil || !t.idleAgain(tc) {
			return
		}
	}
}

// shutdown stops accepting, closes the idle connections, and waits until
// ctx is done for those answering a query, which close after their reply;
// then it closes the rest.
func (t *tcpTable) shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.closing = true
	var idle []*tcpConn
	for e := t.idle.Front(); e != nil; e = e.Next() {
		idle = append(idle, e.Value.(*tcpConn))
	}
	t.mu.Unlock()
	var errs []error
	for _, ln := range t.listeners {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, tc := range idle {
		tc.c.Close()
	}
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.mu.Lock()
		for tc := range t.conns {
			tc.c.Close()
		}
		t.mu.Unlock()
		<-done
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// tcpWriter is the dns.ResponseWriter of one connection: it writes each
// reply with its length, within tcpIOTimeout.
type tcpWriter struct {
	conn *net.TCPConn
	err  error // of the last write; the connection is then closed
}

func (w *tcpWriter) LocalAddr() net.Addr  { return w.conn.LocalAddr() }
func (w *tcpWriter) RemoteAddr() net.Addr { return w.conn.RemoteAddr() }

func (w *tcpWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Write sends b as one message: its length, then b.
func (w *tcpWriter) Write(b []byte) (int, error) {
	if len(b) > dns.MaxMsgSize {
		return 0, dns.ErrBuf
	}
	out := make([]byte, 2, 2+len(b))
	binary.BigEndian.PutUint16(out, uint16(len(b)))
	out = append(out, b...)
	w.conn.SetWriteDeadline(time.Now().Add(tcpIOTimeout))
	if _, w.err = w.conn.Write(out); w.err != nil {
		return 0, w.err
	}
	return len(b), nil
}

func (w *tcpWriter) Close() error        { return w.conn.Close() }
func (w *tcpWriter) TsigStatus() error   { return nil }
func (w *tcpWriter) TsigTimersOnly(bool) {}
func (w *tcpWriter) Hijack()             {}
