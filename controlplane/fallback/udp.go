package fallback

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// udpBatch is the most datagrams one recvmmsg or sendmmsg moves. Under
// load batches fill, and what a call costs (entering and leaving the
// kernel, the poller) is paid once per batch instead of once per query.
const udpBatch = 64

// udpRcvBuf is the receive buffer each UDP socket asks for; the kernel
// doubles it. The default (net.core.rmem_default) holds only a few
// hundred small datagrams, as the kernel counts their memory, and a burst
// that arrives while the loop waits for the CPU overflows it. Much larger
// is no better: under overload the queue stands full, every query waits
// its whole length and has left the cache by the time it is copied to
// user space. `make bench` (rows steadydns-fallback and gdnsd) shows the
// rate this buys.
const udpRcvBuf = 256 << 10

// replyBuf is the room each reply of a batch is packed into: what UDP
// carries at most (ednsSize), doubled, since miekg/dns packs a message
// uncompressed first.
const replyBuf = 2 * ednsSize

// udpWait is the receive and send timeout of each UDP socket. The loop
// waits in recvmmsg, a raw system call on a blocking socket, and on Linux
// a signal interrupts a socket call that has a timeout with EINTR instead
// of restarting it: that is what lets Go's preemption signal, and so a
// stop-the-world of the collector, reach the loop's goroutine while it
// waits (TestUDPWaitLetsGCStop). The timeout itself only bounds a wait no
// signal ends; its length costs one empty return per loop per period.
const udpWait = 250 * time.Millisecond

// udpServer serves one UDP socket, of several per port, with gdnsd's
// loop: wait in recvmmsg (MSG_WAITFORONE) for a batch, answer its queries
// in turn, send the replies with one sendmmsg.
// The socket is blocking and outside Go's netpoller (made with socket(2)
// and bind(2), not the net package), so no datagram wakes another thread
// and the loop never parks in the scheduler, whose search for work would
// take a large share of the CPU under load. The calls are raw, so the
// thread keeps its P rather than have Go's monitor hand it off and wake
// the thread again every few answers: each loop holds a P while it waits,
// and Start leaves at least one P to the rest of the process (udpProcs).
// A signal interrupts the wait (udpWait), and the loop's next call stops
// for a preemption or a stop-the-world at once (mmsg).
// golang.org/x/net's batches would allocate an address per datagram, and
// miekg/dns's UDP server makes a system call and starts a goroutine per
// query; here each reply goes back to the sockaddr the kernel wrote for
// its query, built by the handler TCP uses too (serveMsg).
type udpServer struct {
	s     *Server
	fd    int
	local *net.UDPAddr
	// A socket bound to a wildcard address replies from the address each
	// query came to, which the kernel reports per datagram.
	wildcard bool
	v6       bool
	// closed tells the loop to stop, and a second close that the first
	// has closed the socket.
	closed atomic.Bool
	wg     sync.WaitGroup
}

// newUDPServer sets up fd, a UDP socket bound to local, for its loop. It
// takes fd: it is closed by close, or here on an error.
func newUDPServer(s *Server, fd int, local *net.UDPAddr) (*udpServer, error) {
	u := &udpServer{s: s, fd: fd, local: local, wildcard: local.IP.IsUnspecified(), v6: local.IP.To4() == nil}
	if err := u.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return u, nil
}

func (u *udpServer) setup() error {
	// Past net.core.rmem_max for a privileged process, which the server
	// is to attach XDP; SO_RCVBUF, capped there, otherwise.
	if unix.SetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpRcvBuf) != nil {
		if err := unix.SetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, udpRcvBuf); err != nil {
			return fmt.Errorf("setting the receive buffer: %w", err)
		}
	}
	tv := unix.NsecToTimeval(udpWait.Nanoseconds())
	for _, opt := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
		if err := unix.SetsockoptTimeval(u.fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return fmt.Errorf("setting the socket's timeouts: %w", err)
		}
	}
	if !u.wildcard {
		return nil
	}
	// The address each datagram came to, as IP_PKTINFO or IPV6_PKTINFO
	// (an IPv4 query on a dual-stack socket comes as a mapped address).
	var err error
	if u.v6 {
		err = unix.SetsockoptInt(u.fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
	} else {
		err = unix.SetsockoptInt(u.fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	}
	if err != nil {
		return fmt.Errorf("asking for each datagram's destination: %w", err)
	}
	return nil
}

// start runs the loop until close.
func (u *udpServer) start() {
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer udpProcs.release()
		u.loop()
	}()
}

// close stops the loop, which answers the batch in hand first, and closes
// the socket once the loop has left it, so that no call of the loop can
// reach a descriptor number reused since.
func (u *udpServer) close() error {
	if u.closed.Swap(true) {
		return nil
	}
	// shutdown(2) wakes a recvmmsg waiting on the socket, which returns at
	// once from then on; on a socket that is not connected it does so and
	// reports ENOTCONN. udpWait bounds the wait should it not.
	var errs []error
	if err := unix.Shutdown(u.fd, unix.SHUT_RD); err != nil && err != unix.ENOTCONN {
		errs = append(errs, fmt.Errorf("shutting down udp %s: %w", u.local, err))
	}
	u.wg.Wait()
	if err := unix.Close(u.fd); err != nil {
		errs = append(errs, fmt.Errorf("closing udp %s: %w", u.local, err))
	}
	return errors.Join(errs...)
}

// udpSlot is one datagram's room in a batch: the query, its sender's
// address as the kernel wrote it (which sendmmsg takes back as the
// reply's destination), its control messages, and the reply.
type udpSlot struct {
	buf    []byte
	iov    unix.Iovec
	name   unix.RawSockaddrInet6 // room for either family
	oob    []byte
	remote net.UDPAddr
	ip     [net.IPv6len]byte
	reply  []byte
	outIov unix.Iovec
	// The reply's outcome, observed when the batch is answered; "" when
	// there is none to observe.
	outcome string
}

func (u *udpServer) loop() {
	slots := make([]udpSlot, udpBatch)
	in := make([]unix.Mmsghdr, udpBatch)
	// The replies' headers; out is the part of them still to send.
	outs := make([]unix.Mmsghdr, 0, udpBatch)
	var out []unix.Mmsghdr
	for i := range slots {
		sl := &slots[i]
		// Whole datagrams: a cut one would not parse.
		sl.buf = make([]byte, dns.MaxMsgSize)
		sl.iov.Base = &sl.buf[0]
		sl.iov.SetLen(len(sl.buf))
		if u.wildcard {
			sl.oob = make([]byte, 128)
		}
		// A reply that needs more, one of many records before truncation,
		// gets a bigger buffer from PackBuffer, which the slot keeps.
		sl.reply = make([]byte, 0, replyBuf)
		h := &in[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&sl.name))
		h.Iov = &sl.iov
		h.SetIovlen(1)
		if u.wildcard {
			h.Control = &sl.oob[0]
		}
	}
	w := &replyWriter{local: u.local, inPlace: true}
	fd := uintptr(u.fd)
	for {
		for i := range in {
			in[i].Hdr.Namelen = uint32(unsafe.Sizeof(slots[i].name))
			in[i].Hdr.SetControllen(len(slots[i].oob))
		}
		// Waits for the first datagram, at most udpWait, then takes what
		// else is queued. Raw, as the type's comment says why.
		n, errno := mmsg(unix.SYS_RECVMMSG, fd, in, unix.MSG_WAITFORONE)
		if u.closed.Load() {
			return
		}
		if errno != 0 {
			// EINTR is most likely Go's preemption signal, which the
			// next call's prologue answers; EAGAIN is the timeout. An
			// error about one datagram, as ICMP reports it, reads
			// nothing: the next call is fine.
			continue
		}
		// From the start of outs: out's own start has moved past what
		// the last batch sent, and an append there would reallocate.
		out = outs[:0]
		w.batch = time.Now()
		for i := range in[:n] {
			sl := &slots[i]
			if !sl.setRemote(in[i].Hdr.Namelen) {
				continue
			}
			w.remote, w.reply, w.buf = &sl.remote, nil, sl.reply[:0]
			if !u.serveDatagram(w, sl.buf[:in[i].Len]) {
				// Whatever the panic left half built is not sent.
				w.reply, w.outcome = nil, ""
			}
			sl.outcome, w.outcome = w.outcome, ""
			if w.reply == nil {
				continue
			}
			if unsafe.SliceData(w.reply) != &sl.buf[0] {
				// Packed into the reply buffer, or a bigger one
				// PackBuffer made, which the slot keeps; a reply
				// written in place stays in the query's buffer.
				sl.reply = w.reply
			}
			sl.outIov.Base = unsafe.SliceData(w.reply)
			sl.outIov.SetLen(len(w.reply))
			var h unix.Mmsghdr
			h.Hdr.Name, h.Hdr.Namelen = in[i].Hdr.Name, in[i].Hdr.Namelen
			h.Hdr.Iov = &sl.outIov
			h.Hdr.SetIovlen(1)
			if src := u.source(sl.oob[:in[i].Hdr.Controllen]); src != nil {
				h.Hdr.Control = &src[0]
				h.Hdr.SetControllen(len(src))
			}
			out = append(out, h)
		}
		// Observed before the replies leave, so a client that reads the
		// metrics after its reply sees its query counted.
		took := time.Since(w.batch)
		for i := range slots[:n] {
			if sl := &slots[i]; sl.outcome != "" {
				u.s.opts.Observe(sl.outcome, took)
				sl.outcome = ""
			}
		}
		for len(out) > 0 {
			// Blocking only while the send buffer is full, at most udpWait.
			r, errno := mmsg(unix.SYS_SENDMMSG, fd, out, 0)
			switch {
			case errno == unix.EINTR:
			case errno == unix.EAGAIN:
				// The send buffer stayed full for udpWait: the rest of
				// the batch is dropped, so that a stalled queue costs
				// the loop one timeout a batch, not one a reply.
				out = out[:0]
			case errno != 0 || r == 0:
				// A datagram that cannot be sent is dropped and the
				// rest go on: the client retries or gives up, as after
				// any lost reply.
				out = out[1:]
			default:
				out = out[r:]
			}
		}
	}
}

// serveDatagram answers the datagram b of a batch into w; false if that
// panicked. The deferred recover is open-coded, a few instructions and no
// allocation per datagram.
func (u *udpServer) serveDatagram(w *replyWriter, b []byte) (ok bool) {
	defer u.s.recoverPanic("udp")
	u.s.serveUDP(w, b)
	return true
}

// mmsg makes a raw recvmmsg or sendmmsg (trap) of msgs on fd. It is
// never inlined, so that each call begins with the stack check in the
// function's prologue, where Go stops a goroutine it asked to preempt:
// a preemption signal that lands inside the raw call cannot stop it there
// (the call is not a safe point), but makes the call return EINTR (the
// socket has timeouts, udpWait), and the loop's next call stops. Yielding
// (runtime.Gosched) would not do: a goroutine merely runnable is picked
// up again before the collector, which polls for it, can claim it to scan
// its stack, so each collection would wait on the loop.
//
//go:noinline
func mmsg(trap, fd uintptr, msgs []unix.Mmsghdr, flags int) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
	return int(r), errno
}

// setRemote sets the slot's remote address from the sockaddr the kernel
// wrote, of namelen bytes, reusing the slot's memory. It reports false
// for an address of another family, which no UDP socket receives.
func (sl *udpSlot) setRemote(namelen uint32) bool {
	switch sl.name.Family {
	case unix.AF_INET:
		if namelen < unix.SizeofSockaddrInet4 {
			return false
		}
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sl.name))
		copy(sl.ip[:], sa.Addr[:])
		sl.remote.IP = sl.ip[:net.IPv4len]
		sl.remote.Port = netPort(&sa.Port)
	case unix.AF_INET6:
		if namelen < unix.SizeofSockaddrInet6 {
			return false
		}
		sl.ip = sl.name.Addr
		sl.remote.IP = sl.ip[:]
		sl.remote.Port = netPort(&sl.name.Port)
	default:
		return false
	}
	sl.remote.Zone = ""
	return true
}

// netPort reads a sockaddr's port, which is in network byte order.
func netPort(p *uint16) int {
	b := (*[2]byte)(unsafe.Pointer(p))
	return int(b[0])<<8 | int(b[1])
}

// source is the control message that makes a reply leave from the address
// its query came to, for a socket bound to a wildcard address. An IPv4
// query on a dual-stack socket needs IPv4's: Linux ignores an IPv6 source
// that is a mapped IPv4 address.
func (u *udpServer) source(oob []byte) []byte {
	if !u.wildcard {
		return nil
	}
	var dst net.IP
	if u.v6 {
		var cm ipv6.ControlMessage
		if cm.Parse(oob) == nil {
			dst = cm.Dst
		}
	} else {
		var cm ipv4.ControlMessage
		if cm.Parse(oob) == nil {
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
func (s *Server) serveUDP(w *replyWriter, b []byte) {
	if s.opts.Tap != nil {
		s.tapUDP(w, b)
		return
	}
	qtype := s.serveMsg(w, b)
	s.opts.UDP(qtype, len(b), len(w.reply))
}

// tapUDP is serveUDP that also hands the query and its reply to the tap.
// The query is copied first: the fast path may write the reply over it.
func (s *Server) tapUDP(w *replyWriter, b []byte) {
	q, qt := append([]byte(nil), b...), time.Now()
	qtype := s.serveMsg(w, b)
	s.opts.UDP(qtype, len(b), len(w.reply))
	s.opts.Tap(q, w.reply, addrPort(w.remote), addrPort(w.local), OverUDP, qt, time.Now())
}

// addrPort is a UDP or TCP address as a netip.AddrPort, the zero one for
// another or none.
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort()
	case *net.TCPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
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
	if u, ok := w.(*replyWriter); ok {
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

// AnswerDatagram answers one datagram from client as the UDP sockets do,
// screen and truncation included, and returns the reply, or nil when none
// is sent. Tests that hold the XDP program's answers against the
// fallback's use it.
func (s *Server) AnswerDatagram(b []byte, client netip.AddrPort) []byte {
	w := &replyWriter{remote: net.UDPAddrFromAddrPort(client)}
	s.serveUDP(w, b)
	return w.reply
}
