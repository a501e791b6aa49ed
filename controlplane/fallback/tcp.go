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
	// prefix: a /24 for IPv4, a /48 for IPv6.
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
	// MaxLifetime closes a connection this long after it was accepted,
	// once it waits for its next query: a client that keeps a connection
	// busy, answered or not, holds it this long and one query's I/O
	// bound more at most.
	MaxLifetime time.Duration
}

// DefaultTCPLimits: BIND's and NSD's connection counts are in the
// hundreds and Knot's idle timeout is 10 s; 128 queries per connection is
// what miekg/dns allows by default; NSD's idle timeout, 2 minutes, is
// the lifetime.
var DefaultTCPLimits = TCPLimits{MaxConnections: 1024, MaxPerPrefix: 64, IdleTimeout: 10 * time.Second, MaxQueries: 128,
	MaxLifetime: 2 * time.Minute}

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
	if l.MaxLifetime == 0 {
		l.MaxLifetime = d.MaxLifetime
	}
	return l
}

// tcpIOTimeout bounds a message once its first byte has arrived, and the
// write of a reply: a client that trickles a query or does not read its
// replies holds its connection this long at most. It is miekg/dns's
// default read and write timeout.
const tcpIOTimeout = 2 * time.Second

// Client prefixes for MaxPerPrefix: what one site usually holds. A site
// is assigned up to an IPv6 /48, and one that has a /48 must count as
// one prefix, not as 256 of /56.
const (
	tcpPrefix4 = 24
	tcpPrefix6 = 48
)

// TCPEvent is something that happened to a TCP connection, for
// Options.OnTCP.
type TCPEvent int

const (
	TCPOpened TCPEvent = iota // accepted and served
	TCPClosed                 // closed, for any reason, after TCPOpened
	// The rest each precede the TCPClosed of the connection they close:
	// idle for IdleTimeout; idle, or busy reading a query or writing a
	// reply, and answered the least recently when a limit was reached,
	// to make room for a new one; past MaxLifetime; after MaxQueries
	// replies.
	TCPIdleTimeout
	TCPEvicted
	TCPEvictedBusy
	TCPLifetime
	TCPQueryLimit
)

// tcpTable holds the open connections of every TCP listener of a server,
// so the limits hold across listen addresses.
//
// When a limit is reached, the connection answered the least recently
// (or accepted, if it has not been answered yet) is closed to admit the
// new one, whether it waits for a query or reads one. Its age would not
// do: a client that trickles its queries in is never idle and can
// reconnect to be young, but it is answered once per trickled query at
// most, so it is soon the least recently answered, while a client that
// asks at the rate it is answered stays, however long it has been
// connected. So a new client always gets in, and no client holds a slot
// without being answered often.
type tcpTable struct {
	s   *Server
	lim TCPLimits

	mu       sync.Mutex
	served   list.List // *tcpConn, the least recently answered first
	prefixes map[netip.Prefix]*prefixConns
	closing  bool

	listeners []*net.TCPListener
	wg        sync.WaitGroup // accept loops and connections
}

// prefixConns are the connections of one client prefix.
type prefixConns struct {
	served list.List // *tcpConn, the least recently answered first
}

type tcpConn struct {
	c      *net.TCPConn
	prefix netip.Prefix
	// expires is when MaxLifetime ends the connection.
	expires time.Time
	// servedAt and prefixServedAt are the connection's places in the
	// table's and its prefix's lists; busy is whether it reads a query
	// or writes a reply; gone whether it is out of the table, closed or
	// being closed.
	servedAt, prefixServedAt *list.Element
	busy, gone               bool
}

func newTCPTable(s *Server, lim TCPLimits) *tcpTable {
	return &tcpTable{s: s, lim: lim.WithDefaults(), prefixes: map[netip.Prefix]*prefixConns{}}
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

// admit serves c, after closing the connection answered the least
// recently (of c's prefix when that prefix is full) if a limit is
// reached. Both limits are at least 1, so there is always one to close.
func (t *tcpTable) admit(c *net.TCPConn) {
	tc := &tcpConn{c: c, prefix: clientPrefix(c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()),
		expires: time.Now().Add(t.lim.MaxLifetime)}
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		c.Close()
		return
	}
	pc := t.prefixes[tc.prefix]
	var victim *tcpConn
	switch {
	case pc != nil && pc.served.Len() >= t.lim.MaxPerPrefix:
		victim = pc.served.Front().Value.(*tcpConn)
	case t.served.Len() >= t.lim.MaxConnections:
		victim = t.served.Front().Value.(*tcpConn)
	}
	var why TCPEvent
	if victim != nil {
		why = TCPEvicted
		if victim.busy {
			why = TCPEvictedBusy
		}
		t.removeLocked(victim)
	}
	if pc = t.prefixes[tc.prefix]; pc == nil {
		pc = &prefixConns{}
		t.prefixes[tc.prefix] = pc
	}
	tc.servedAt = t.served.PushBack(tc)
	tc.prefixServedAt = pc.served.PushBack(tc)
	t.wg.Add(1)
	t.mu.Unlock()
	if victim != nil {
		t.s.opts.OnTCP(why)
		// Its goroutine sees its read or write fail and reports it
		// closed.
		victim.c.Close()
	}
	t.s.opts.OnTCP(TCPOpened)
	go t.serveConn(tc)
}

func (t *tcpTable) removeLocked(tc *tcpConn) {
	if tc.gone {
		return
	}
	tc.gone = true
	t.served.Remove(tc.servedAt)
	pc := t.prefixes[tc.prefix]
	if pc.served.Remove(tc.prefixServedAt); pc.served.Len() == 0 {
		delete(t.prefixes, tc.prefix)
	}
}

// setBusy marks tc as reading a query; false if it was closed meanwhile.
func (t *tcpTable) setBusy(tc *tcpConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tc.busy = true
	return !tc.gone
}

// answering marks tc as answered now, before its reply is written, so a
// client that has its reply finds the table in its new order; false if it
// was closed meanwhile.
func (t *tcpTable) answering(tc *tcpConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc.gone {
		return false
	}
	t.served.MoveToBack(tc.servedAt)
	t.prefixes[tc.prefix].served.MoveToBack(tc.prefixServedAt)
	return true
}

// answered marks tc as waiting for a query after its reply; false if it
// was closed meanwhile or the server is shutting down.
func (t *tcpTable) answered(tc *tcpConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc.gone || t.closing {
		return false
	}
	tc.busy = false
	return true
}

// report reports ev about tc unless tc was closed meanwhile, by a limit
// that reported it already or by the shutdown.
func (t *tcpTable) report(tc *tcpConn, ev TCPEvent) {
	t.mu.Lock()
	gone := tc.gone
	t.removeLocked(tc)
	t.mu.Unlock()
	if !gone {
		t.s.opts.OnTCP(ev)
	}
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
	defer t.s.recoverPanic("tcp")
	w := &tcpWriter{conn: tc.c}
	var hdr [2]byte
	for range t.lim.MaxQueries {
		wait := time.Now().Add(t.lim.IdleTimeout)
		lifetime := tc.expires.Before(wait)
		if lifetime {
			wait = tc.expires
		}
		tc.c.SetReadDeadline(wait)
		n, err := tc.c.Read(hdr[:])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				ev := TCPIdleTimeout
				if lifetime {
					ev = TCPLifetime
				}
				t.report(tc, ev)
			}
			return
		}
		if !t.setBusy(tc) {
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
		if !t.answering(tc) {
			return
		}
		if t.s.opts.Tap != nil {
			qt := time.Now()
			w.reply = nil
			t.s.serveMsg(w, msg)
			t.s.opts.Tap(msg, w.reply, addrPort(w.RemoteAddr()), addrPort(w.LocalAddr()), true, qt, time.Now())
		} else {
			t.s.serveMsg(w, msg)
		}
		if w.err != nil || !t.answered(tc) {
			return
		}
	}
	t.report(tc, TCPQueryLimit)
}

// shutdown stops accepting, closes the idle connections, and waits until
// ctx is done for those answering a query, which close after their reply;
// then it closes the rest.
func (t *tcpTable) shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.closing = true
	var idle []*tcpConn
	for e := t.served.Front(); e != nil; e = e.Next() {
		if tc := e.Value.(*tcpConn); !tc.busy {
			idle = append(idle, tc)
		}
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
		for e := t.served.Front(); e != nil; e = e.Next() {
			e.Value.(*tcpConn).c.Close()
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
	// reply is the last message sent, for the tap.
	reply []byte
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
	w.reply = out[2:]
	return len(b), nil
}

func (w *tcpWriter) Close() error        { return w.conn.Close() }
func (w *tcpWriter) TsigStatus() error   { return nil }
func (w *tcpWriter) TsigTimersOnly(bool) {}
func (w *tcpWriter) Hijack()             {}
