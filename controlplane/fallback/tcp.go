package fallback

import (
	"container/list"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
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
	// lifetime, as NSD's tcp-query-count; 0, the default, sets none, as
	// NSD's, Knot's and PowerDNS's defaults. The server half-closes the
	// connection after the last reply. A connection's queries are read
	// a buffer at a time and answered in order, so what a client
	// pipelines beyond one buffer waits in the kernel's receive buffer.
	MaxQueries int
	// MaxLifetime closes a connection this long after it was accepted,
	// once the queries it has read whole are answered: a client that
	// keeps a connection busy, pipelining or not, holds it this long and
	// one read's I/O bound more at most.
	MaxLifetime time.Duration
}

// DefaultTCPLimits: BIND's and NSD's connection counts are in the
// hundreds and Knot's idle timeout is 10 s; NSD's idle timeout, 2
// minutes, is the lifetime. A resolver that pipelines its queries on one
// connection is never cut off by a count of them: MaxLifetime bounds the
// connection.
var DefaultTCPLimits = TCPLimits{MaxConnections: 1024, MaxPerPrefix: 64, IdleTimeout: 10 * time.Second,
	MaxLifetime: 2 * time.Minute}

// WithDefaults returns l with every zero field but MaxQueries set from
// DefaultTCPLimits.
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
	// The TLS handshake of a DNS-over-TLS connection failed or took
	// longer than a query may.
	TCPHandshakeFailed
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
	// raw is the socket; c carries the messages: raw itself, or a TLS
	// session over it. Limits and shutdown close raw, which ends c's
	// reads and writes at once, where a TLS close would first try to
	// send its alert.
	raw    *net.TCPConn
	c      streamConn
	tls    bool
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

// streamConn is what a connection's messages go over: a TCP socket, or a
// TLS session over one (*tls.Conn).
type streamConn interface {
	net.Conn
	CloseWrite() error
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

// serve accepts on ln until it closes: DNS over TCP, or over TLS with
// conf (RFC 7858) when conf is not nil.
func (t *tcpTable) serve(ln *net.TCPListener, conf *tls.Config) {
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
			t.admit(c, conf)
		}
	}()
}

// admit serves c, after closing the connection answered the least
// recently (of c's prefix when that prefix is full) if a limit is
// reached. Both limits are at least 1, so there is always one to close.
func (t *tcpTable) admit(c *net.TCPConn, conf *tls.Config) {
	tc := &tcpConn{raw: c, c: c, prefix: clientPrefix(c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()),
		expires: time.Now().Add(t.lim.MaxLifetime)}
	if conf != nil {
		tc.c, tc.tls = tls.Server(c, conf), true
	}
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
		victim.raw.Close()
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
		tc.raw.Close()
		t.s.opts.OnTCP(TCPClosed)
	}()
	defer t.s.recoverPanic("tcp")
	if tc.tls && !t.handshake(tc) {
		return
	}
	answered := 0
	// Waiting for a query, a connection reads its first bytes here: it
	// holds no buffer until one arrives.
	var first [2]byte
	for {
		now := time.Now()
		if !now.Before(tc.expires) {
			// Past its lifetime between two batches: queries the client
			// pipelined after them may be waiting.
			t.finish(tc)
			t.report(tc, TCPLifetime)
			return
		}
		wait := now.Add(t.lim.IdleTimeout)
		lifetime := tc.expires.Before(wait)
		if lifetime {
			wait = tc.expires
		}
		tc.c.SetReadDeadline(wait)
		n, err := tc.c.Read(first[:])
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
		if !t.setBusy(tc) || !t.answer(tc, first[:n], &answered) {
			return
		}
		if t.lim.MaxQueries > 0 && answered >= t.lim.MaxQueries {
			t.finish(tc)
			t.report(tc, TCPQueryLimit)
			return
		}
		if !t.answered(tc) {
			return
		}
	}
}

// handshake completes tc's TLS handshake within tcpIOTimeout, busy
// meanwhile; false, reported, if it failed or the connection was closed
// meanwhile.
func (t *tcpTable) handshake(tc *tcpConn) bool {
	if !t.setBusy(tc) {
		return false
	}
	tc.c.SetDeadline(time.Now().Add(tcpIOTimeout))
	if err := tc.c.(*tls.Conn).Handshake(); err != nil {
		t.report(tc, TCPHandshakeFailed)
		return false
	}
	return t.answered(tc)
}

// tcpRoom is what a connection answers in while it is busy: the bytes
// read, the replies to write, and the writer. A connection takes one from
// tcpRooms when a query arrives and puts it back once it waits for the
// next, so idle connections hold no buffers.
type tcpRoom struct {
	in, out  []byte
	w        replyWriter
	outcomes []string
}

// tcpRead is the room a connection's reads start with: dozens of
// pipelined queries. A larger message grows it. tcpWrite is how much of
// their replies a connection gathers before it writes them.
const (
	tcpRead  = 4 << 10
	tcpWrite = 16 << 10
)

var tcpRooms = sync.Pool{New: func() any {
	return &tcpRoom{in: make([]byte, 0, tcpRead), out: make([]byte, 0, tcpRead),
		w: replyWriter{buf: make([]byte, 0, replyBuf)}}
}}

// answer answers tc's queries, from first, the bytes that woke it, until
// none is left half read, the connection has had MaxQueries replies
// (*answered counts them) or its lifetime has passed: it reads what the client has sent, answers
// each whole query in it in turn, and writes their replies with one
// write (one per tcpWrite bytes of them). So a client that pipelines its
// queries costs one read and one write for as many as have arrived, not
// two reads and a write each.
// false when the connection is to close: a read or a write failed or took
// longer than tcpIOTimeout, or a limit closed it meanwhile.
func (t *tcpTable) answer(tc *tcpConn, first []byte, answered *int) bool {
	r := tcpRooms.Get().(*tcpRoom)
	defer tcpRooms.Put(r)
	w := &r.w
	w.local, w.remote = tc.c.LocalAddr(), tc.c.RemoteAddr()
	// in[off:] is read and not yet answered.
	in, off := append(r.in[:0], first...), 0
	defer func() { r.in = in[:0] }()
	for {
		// The first query whole, and whatever else has arrived. The query
		// has tcpIOTimeout to arrive, however it is cut.
		for waiting := false; ; waiting = true {
			size, whole := tcpMessage(in[off:])
			if whole {
				break
			}
			if !waiting {
				tc.c.SetReadDeadline(time.Now().Add(tcpIOTimeout))
			}
			if off > 0 {
				in, off = append(in[:0], in[off:]...), 0
			}
			if len(in) == cap(in) {
				in = slices.Grow(in, max(2, size+2)-len(in))
			}
			n, err := tc.c.Read(in[len(in):cap(in)])
			if err != nil {
				return false
			}
			in = in[:len(in)+n]
		}
		if tc.tls {
			in = buffered(tc.c, in)
		}
		w.batch = time.Now()
		out, outcomes := r.out[:0], r.outcomes[:0]
		// flush observes the replies in out, then sends them.
		flush := func() bool {
			// Observed before the replies leave, as the UDP loop's.
			took := time.Since(w.batch)
			for _, o := range outcomes {
				if o != "" {
					t.s.opts.Observe(o, took)
				}
			}
			outcomes = outcomes[:0]
			if len(out) == 0 {
				return true
			}
			if !t.answering(tc) {
				return false
			}
			tc.c.SetWriteDeadline(time.Now().Add(tcpIOTimeout))
			_, err := tc.c.Write(out)
			out = out[:0]
			return err == nil
		}
		for t.lim.MaxQueries == 0 || *answered < t.lim.MaxQueries {
			size, whole := tcpMessage(in[off:])
			if !whole {
				break
			}
			msg := in[off+2 : off+2+size]
			off += 2 + size
			*answered++
			w.reply, w.outcome = nil, ""
			if tap := t.s.opts.Tap; tap != nil {
				qt := time.Now()
				t.s.serveMsg(w, msg)
				over := OverTCP
				if tc.tls {
					over = OverTLS
				}
				tap(msg, w.reply, addrPort(w.remote), addrPort(w.local), over, qt, time.Now())
			} else {
				t.s.serveMsg(w, msg)
			}
			outcomes = append(outcomes, w.outcome)
			// The handler truncates to what the length can say.
			if w.reply != nil && len(w.reply) <= dns.MaxMsgSize {
				out = binary.BigEndian.AppendUint16(out, uint16(len(w.reply)))
				out = append(out, w.reply...)
			}
			// A client that asks for large answers and reads none holds
			// one write's worth of them, not a read's worth of queries'.
			if len(out) >= tcpWrite && !flush() {
				return false
			}
		}
		ok := flush()
		r.out, r.outcomes = out[:0], outcomes[:0]
		if !ok {
			return false
		}
		if off == len(in) || (t.lim.MaxQueries > 0 && *answered >= t.lim.MaxQueries) || !w.batch.Before(tc.expires) {
			return true
		}
	}
}

// buffered appends to in what a TLS session has already read and not yet
// returned. A session's Read returns one record at a time, and a client
// sends a record a query, so without this each query of a pipeline
// would be answered, and written, alone. A read whose deadline has passed
// returns a record the session holds whole, and otherwise fails at once
// without a system call; the failure is a timeout, which leaves the
// session usable, or the error the next read returns too.
func buffered(c streamConn, in []byte) []byte {
	c.SetReadDeadline(time.Unix(1, 0))
	for {
		if len(in) == cap(in) {
			in = slices.Grow(in, tcpRead)
		}
		n, err := c.Read(in[len(in):cap(in)])
		in = in[:len(in)+n]
		if err != nil {
			return in
		}
	}
}

// tcpMessage reads the length of the message b starts with: size, or -1
// while b is shorter than the length itself, and whether b holds it whole.
func tcpMessage(b []byte) (size int, whole bool) {
	if len(b) < 2 {
		return -1, false
	}
	size = int(binary.BigEndian.Uint16(b))
	return size, len(b) >= 2+size
}

// finish closes tc's side after its last reply, at a limit. The client
// may have sent queries past it: a socket closed with data unread resets the
// connection, and a reset can destroy replies the client has not read
// yet. So the server half-closes, which the client reads as the end after
// the last reply, and reads what else comes until the client closes its
// side too, tcpIOTimeout at most.
func (t *tcpTable) finish(tc *tcpConn) {
	if tc.c.CloseWrite() != nil {
		return
	}
	tc.c.SetReadDeadline(time.Now().Add(tcpIOTimeout))
	var discard [512]byte
	for {
		if _, err := tc.c.Read(discard[:]); err != nil {
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
		tc.raw.Close()
	}
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.mu.Lock()
		for e := t.served.Front(); e != nil; e = e.Next() {
			e.Value.(*tcpConn).raw.Close()
		}
		t.mu.Unlock()
		<-done
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}
