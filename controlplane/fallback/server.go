package fallback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// Options configure a Server.
type Options struct {
	// Listen lists the addresses served over both UDP and TCP. Port 0
	// picks a free port, the same for both; Addrs reports it.
	Listen []netip.AddrPort
	// Observe is called once per reply or dropped message with one of the
	// Outcome constants and the time the reply took to build, from the
	// parsed query to the reply ready to send, over UDP from the read of
	// the query's batch to the batch's replies ready, since they leave
	// together; zero for a dropped message.
	// nil observes nothing.
	Observe func(outcome string, took time.Duration)
	// ID is answered to id.server and hostname.bind CH TXT, Version to
	// version.server and version.bind; empty refuses them.
	ID, Version string
	// NSID is the value replies carry in an NSID option (RFC 5001) when
	// the query's OPT has one, as XDP's do; empty turns NSID off.
	NSID  []byte
	Debug Debug
	// UDP is called once per datagram received over UDP with its qtype
	// (0 when it has no question or does not parse), its size and the
	// size of the reply sent to it (0 when none is): what a reflection
	// attack would gain. nil observes nothing.
	UDP func(qtype uint16, in, out int)
	// TCP bounds the TCP connections, over all listen addresses.
	TCP TCPLimits
	// OnTCP is called as TCP connections open, close, and are refused or
	// closed for idling; nil observes nothing.
	OnTCP func(TCPEvent)
	// RRL limits the rate of UDP replies (server.rrl); nil limits none.
	RRL Limiter
}

// Limiter is response rate limiting: controlplane/rrl's accounts every
// reply in the state XDP accounts its own in.
type Limiter interface {
	// Limit accounts reply r to client and says what to do with it.
	Limit(client netip.Addr, r Reply) Verdict
}

// Reply is what the limiter keys a reply by, with the client's prefix.
type Reply struct {
	Qname string // as asked; empty without a question
	Qtype uint16
	Rcode int
	Zone  string // for NXDOMAIN, the origin of the zone the name is not in
}

// Verdict is what becomes of a reply: sent, sent truncated (TC=1, no
// records, so the client asks again over TCP), or not sent.
type Verdict int

const (
	Send Verdict = iota
	Slip
	Drop
)

// Server is the fallback DNS server.
type Server struct {
	opts  Options
	nsid  *dns.EDNS0_NSID        // from Options.NSID; nil while off
	view  atomic.Pointer[served] // never nil
	tcp   *tcpTable
	udp   []*udpServer
	addrs []net.Addr
}

// New returns a server for v. It does not listen until Start.
func New(opts Options, v *View) *Server {
	if opts.Observe == nil {
		opts.Observe = func(string, time.Duration) {}
	}
	if opts.UDP == nil {
		opts.UDP = func(uint16, int, int) {}
	}
	if opts.OnTCP == nil {
		opts.OnTCP = func(TCPEvent) {}
	}
	s := &Server{opts: opts, nsid: nsidOption(opts.NSID)}
	s.tcp = newTCPTable(s, opts.TCP)
	s.SetView(v)
	return s
}

// SetView makes the server answer from v, from the next query on. It
// indexes v's answers for the fast path first, which takes a zone lookup
// for each A and AAAA set.
func (s *Server) SetView(v *View) { s.view.Store(newServed(v, s.opts.Debug.Name)) }

// Handler returns the handler that builds every reply, for tests.
func (s *Server) Handler() dns.Handler { return dns.HandlerFunc(s.serveDNS) }

// Addrs returns the bound addresses, UDP then TCP for each listen address,
// once Start has returned.
func (s *Server) Addrs() []net.Addr { return s.addrs }

// TCPLimits returns the TCP limits in force, defaults filled in.
func (s *Server) TCPLimits() TCPLimits { return s.tcp.lim }

// Start binds UDP and TCP on every listen address and serves them until
// Shutdown. It returns once all are bound and serving.
func (s *Server) Start() error {
	var lns []*net.TCPListener
	for _, ap := range s.opts.Listen {
		// A socket per P, not per CPU: serve keeps a P more than its
		// CPUs, and a P left idle under load has a thread waiting in the
		// netpoller, which every datagram arriving on a socket wakes even
		// while its loop is busy reading it. With one socket on one CPU
		// that cost a context switch every 3 to 4 answers; with a loop on
		// every P none waits there.
		pcs, l, err := listen(ap, runtime.GOMAXPROCS(0))
		if err != nil {
			s.closeAll(lns)
			return err
		}
		lns = append(lns, l)
		s.addrs = append(s.addrs, pcs[0].LocalAddr(), l.Addr())
		for _, pc := range pcs {
			u, err := newUDPServer(s, pc)
			if err != nil {
				for _, pc := range pcs {
					pc.Close()
				}
				s.closeAll(lns)
				return fmt.Errorf("setting up udp %s: %w", ap, err)
			}
			s.udp = append(s.udp, u)
		}
	}
	for _, l := range lns {
		s.tcp.serve(l)
	}
	for _, u := range s.udp {
		u.start()
	}
	return nil
}

// Shutdown stops every listener and waits, until ctx is done, for the
// queries in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	for _, u := range s.udp {
		if err := u.close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := s.tcp.shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closeAll closes what Start bound before it failed.
func (s *Server) closeAll(lns []*net.TCPListener) {
	for _, u := range s.udp {
		u.conn.Close()
	}
	for _, l := range lns {
		l.Close()
	}
	s.udp, s.addrs = nil, nil
}

// portTries bounds the attempts to find a port free for both UDP and TCP.
const portTries = 8

// reusePort binds with SO_REUSEPORT: the kernel spreads datagrams across
// the sockets of one port by their addresses and ports, so each socket's
// loop runs on its own CPU without sharing a receive queue, and a second
// `steadydns serve` (an upgrade) binds beside the first and answers before
// the first stops. Only a process of the same user can join a port bound
// so.
var reusePort = net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}}

// listen binds n UDP sockets and one TCP listener on ap, all with
// SO_REUSEPORT. For port 0 the kernel picks the first UDP socket's port,
// and the rest take the same one, so that one address serves both.
func listen(ap netip.AddrPort, n int) ([]*net.UDPConn, *net.TCPListener, error) {
	for try := 1; ; try++ {
		first, err := listenUDP(ap)
		if err != nil {
			return nil, nil, err
		}
		port := netip.AddrPortFrom(ap.Addr(), uint16(first.LocalAddr().(*net.UDPAddr).Port))
		l, err := reusePort.Listen(context.Background(), "tcp", port.String())
		if err != nil {
			first.Close()
			if ap.Port() != 0 || try == portTries || !errors.Is(err, syscall.EADDRINUSE) {
				return nil, nil, fmt.Errorf("listening on tcp %s: %w", port, err)
			}
			continue
		}
		pcs := []*net.UDPConn{first}
		for len(pcs) < n {
			pc, err := listenUDP(port)
			if err != nil {
				for _, pc := range pcs {
					pc.Close()
				}
				l.Close()
				return nil, nil, err
			}
			pcs = append(pcs, pc)
		}
		return pcs, l.(*net.TCPListener), nil
	}
}

func listenUDP(ap netip.AddrPort) (*net.UDPConn, error) {
	pc, err := reusePort.ListenPacket(context.Background(), "udp", ap.String())
	if err != nil {
		return nil, fmt.Errorf("listening on udp %s: %w", ap, err)
	}
	return pc.(*net.UDPConn), nil
}
