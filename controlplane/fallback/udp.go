package fallback

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpBatch is the most datagrams one recvmmsg or sendmmsg moves. Under
// load batches fill, and what a call costs (entering and leaving the
// kernel, the poller) is paid once per batch instead of once per query.
const udpBatch = 32

// replyBuf is the room each reply of a batch is packed into: what UDP
// carries at most (ednsSize), doubled, since miekg/dns packs a message
// uncompressed first.
const replyBuf = 2 * ednsSize

// batchConn reads and writes datagrams in batches: an ipv4.PacketConn or
// an ipv6.PacketConn (ipv4.Message and ipv6.Message are one type).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// udpServer serves one UDP socket, of one per CPU on a port, with a loop
// that reads a batch, answers its queries in turn and sends the replies as
// a batch.
// miekg/dns's own UDP server reads and writes one datagram per system call
// and starts a goroutine per query; this does neither, and builds every
// reply with the same handler.
type udpServer struct {
	s    *Server
	conn *net.UDPConn
	bc   batchConn
	// A socket bound to a wildcard address replies from the address each
	// query came to, which the kernel reports per datagram.
	wildcard bool
	v6       bool
	wg       sync.WaitGroup
}

func newUDPServer(s *Server, conn *net.UDPConn) (*udpServer, error) {
	u := &udpServer{s: s, conn: conn}
	la := conn.LocalAddr().(*net.UDPAddr)
	u.wildcard = la.IP.IsUnspecified()
	u.v6 = la.IP.To4() == nil
	if u.v6 {
		pc := ipv6.NewPacketConn(conn)
		if u.wildcard {
			if err := pc.SetControlMessage(ipv6.FlagDst, true); err != nil {
				return nil, err
			}
		}
		u.bc = pc
	} else {
		pc := ipv4.NewPacketConn(conn)
		if u.wildcard {
			if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
				return nil, err
			}
		}
		u.bc = pc
	}
	return u, nil
}

// start runs the loop until the socket closes.
func (u *udpServer) start() {
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		u.loop()
	}()
}

// close closes the socket and waits for the loop, which answers the batch
// in hand first.
func (u *udpServer) close() error {
	err := u.conn.Close()
	u.wg.Wait()
	return err
}

func (u *udpServer) loop() {
	in := make([]ipv4.Message, udpBatch)
	for i := range in {
		// Whole datagrams: a cut one would not parse.
		in[i].Buffers = [][]byte{make([]byte, dns.MaxMsgSize)}
		if u.wildcard {
			in[i].OOB = make([]byte, 128)
		}
	}
	replies := make([][]byte, udpBatch)
	for i := range replies {
		// A reply that needs more, one of many records before truncation,
		// gets a bigger buffer from PackBuffer, which the slot keeps.
		replies[i] = make([]byte, 0, replyBuf)
	}
	out := make([]ipv4.Message, 0, udpBatch)
	w := &udpWriter{local: u.conn.LocalAddr()}
	for {
		n, err := u.bc.ReadBatch(in, 0)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an error reading one datagram, as ICMP reports it: the next batch is fine
		}
		out = out[:0]
		for i := range in[:n] {
			m := &in[i]
			w.remote, w.reply, w.buf = m.Addr, nil, replies[i][:0]
			u.s.serveUDP(w, m.Buffers[0][:m.N])
			if w.reply == nil {
				continue
			}
			replies[i] = w.reply
			out = append(out, ipv4.Message{Buffers: [][]byte{w.reply}, Addr: m.Addr, OOB: u.source(m)})
		}
		// A datagram that cannot be sent is dropped and the rest go on:
		// the client retries or gives up, as after any lost reply.
		for len(out) > 0 {
			k, err := u.bc.WriteBatch(out, 0)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				k = 1
			}
			out = out[k:]
		}
	}
}

// source is the control message that makes a reply leave from the address
// its query came to, for a socket bound to a wildcard address. An IPv4
// query on a dual-stack socket needs IPv4's: Linux ignores an IPv6 source
// that is a mapped IPv4 address.
func (u *udpServer) source(m *ipv4.Message) []byte {
	if !u.wildcard {
		return nil
	}
	var dst net.IP
	if u.v6 {
		var cm ipv6.ControlMessage
		if cm.Parse(m.OOB[:m.NN]) == nil {
			dst = cm.Dst
		}
	} else {
		var cm ipv4.ControlMessage
		if cm.Parse(m.OOB[:m.NN]) == nil {
			dst = cm.Dst
		}
	}
	switch {
	case dst == nil:
		return nil
	case dst.To4() != nil:
		return (&ipv4.ControlMessage{Src: dst}).Marshal()
	default:
		return (&ipv6.ControlMessage{Src: dst}).Marshal()
	}
}

// serveUDP answers one datagram into w and reports the bytes in and out.
func (s *Server) serveUDP(w *udpWriter, b []byte) {
	qtype := s.serveMsg(w, b)
	s.opts.UDP(qtype, len(b), len(w.reply))
}

// serveMsg does for one datagram or TCP message what miekg/dns does
// before its handler: it drops what is shorter than a header or is a
// response, and hands the handler the query, screened, so both transports
// answer alike. It returns the query's qtype, 0 when it has none.
func (s *Server) serveMsg(w dns.ResponseWriter, b []byte) uint16 {
	if len(b) < headerLen {
		s.invalid(b, nil)
		return 0
	}
	if s.accept(dns.Header{Bits: uint16(b[2])<<8 | uint16(b[3])}) != dns.MsgAccept {
		return 0
	}
	if u, ok := w.(*udpWriter); ok {
		if qtype, ok := s.answerFast(u, b); ok {
			return qtype
		}
		// A selection the fast path drew is for this query alone.
		defer func() { u.scratch.pre = preselected{} }()
	}
	return s.serveSlow(w, b)
}

// serveSlow answers b with miekg/dns: every query the fast path declines.
func (s *Server) serveSlow(w dns.ResponseWriter, b []byte) uint16 {
	// One unpack does for the screen and the handler.
	var req dns.Msg
	if parse(b, &req) != nil {
		req = dns.Msg{}
		if c := dropOptions(b); c == nil || parse(c, &req) != nil {
			req = dns.Msg{}
			if err := req.Unpack(bareHeader(b)); err != nil {
				// A bare header always unpacks; this is a bug, not a
				// query to answer from a guess.
				s.invalid(b, err)
				return 0
			}
		}
	}
	s.serveDNS(w, &req)
	if len(req.Question) != 1 {
		return 0
	}
	return req.Question[0].Qtype
}

// udpWriter is the dns.ResponseWriter of one datagram in a batch: it packs
// the reply into buf and keeps it for the batch's sendmmsg.
type udpWriter struct {
	local, remote net.Addr
	buf, reply    []byte
	scratch       scratch
}

func (w *udpWriter) LocalAddr() net.Addr  { return w.local }
func (w *udpWriter) RemoteAddr() net.Addr { return w.remote }

func (w *udpWriter) WriteMsg(m *dns.Msg) error {
	// PackBuffer packs in place only when the buffer's length, not its
	// capacity, holds the message uncompressed; given buf[:0] it would
	// allocate every reply.
	b, err := m.PackBuffer(w.buf[:cap(w.buf)])
	if err != nil {
		return err
	}
	w.reply = b
	return nil
}

func (w *udpWriter) Write(b []byte) (int, error) {
	w.reply = append(w.buf[:0], b...)
	return len(b), nil
}

func (w *udpWriter) Close() error        { return nil }
func (w *udpWriter) TsigStatus() error   { return nil }
func (w *udpWriter) TsigTimersOnly(bool) {}
func (w *udpWriter) Hijack()             {}

// AnswerDatagram answers one datagram from client as the UDP sockets do,
// screen and truncation included, and returns the reply, or nil when none
// is sent. Tests that hold the XDP program's answers against the
// fallback's use it.
func (s *Server) AnswerDatagram(b []byte, client netip.AddrPort) []byte {
	w := &udpWriter{remote: net.UDPAddrFromAddrPort(client)}
	s.serveUDP(w, b)
	return w.reply
}
