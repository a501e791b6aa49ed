package fallback

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"runtime/debug"
	"sync"
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
	// TLS serves DNS over TLS (RFC 7858) on its addresses; nil serves
	// none.
	TLS *TLSOptions
	// TCP bounds the TCP connections, over all listen addresses, TLS's
	// included.
	TCP TCPLimits
	// OnTCP is called as TCP connections open, close, and are refused or
	// closed for idling; nil observes nothing.
	OnTCP func(TCPEvent)
	// RRL limits the rate of UDP replies (server.rrl); nil limits none.
	RRL Limiter
	// OnPanic is called with "udp" or "tcp" when answering a datagram or
	// serving a connection panicked: the server logged the panic and its
	// stack, dropped that datagram or closed that connection, and serves
	// on. nil observes nothing.
	OnPanic func(where string)
	// Tap is given every query, from client to local over over, received
	// at qt, and its reply sent at rt, nil when none was (server.dnstap).
	// It must copy what it keeps and never block. nil logs none.
	Tap func(query, reply []byte, client, local netip.AddrPort, over Transport, qt, rt time.Time)
}

// Transport is what a query came over, for Options.Tap.
type Transport int

const (
	OverUDP Transport = iota
	OverTCP
	OverTLS
)

// TLSOptions are DNS over TLS's: the addresses, port 853 by convention
// (port 0 picks a free one), and the TLS configuration, whose
// GetCertificate lets a caller change the certificate as it runs.
type TLSOptions struct {
	Listen []netip.AddrPort
	Config *tls.Config
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
	opts Options
	nsid *dns.EDNS0_NSID // from Options.NSID; nil while off
	// keepalive is the edns-tcp-keepalive option of TCP replies, from
	// Options.TCP's idle timeout.
	keepalive *dns.EDNS0_TCP_KEEPALIVE
	view      atomic.Pointer[served] // never nil
	tcp       *tcpTable
	udp       []*udpServer
	addrs     []net.Addr
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
	if opts.OnPanic == nil {
		opts.OnPanic = func(string) {}
	}
	s := &Server{opts: opts, nsid: nsidOption(opts.NSID)}
	s.tcp = newTCPTable(s, opts.TCP)
	s.keepalive = keepaliveOption(s.tcp.lim.IdleTimeout)
	s.SetView(v)
	return s
}

// SetView makes the server answer from v, from the next query on. It
// indexes v's answers for the fast path first, which takes a zone lookup
// for each A and AAAA set.
func (s *Server) SetView(v *View) { s.view.Store(newServed(v, s.opts.Debug.Name)) }

// Prepared is a view with its fast path's index, built ahead of SetPrepared
// by Prepare: on a zone of millions of sets the index takes seconds, which
// a caller may spend while it does other work.
type Prepared struct {
	sv    *served
	debug string
}

// Prepare indexes v for a server whose Options.Debug.Name is debug.
func Prepare(v *View, debug string) *Prepared { return &Prepared{newServed(v, debug), debug} }

// SetPrepared is SetView with the index p holds. A p prepared for another
// debug name is indexed again.
func (s *Server) SetPrepared(p *Prepared) {
	if p.debug != s.opts.Debug.Name {
		s.SetView(p.sv.v)
		return
	}
	s.view.Store(p.sv)
}

// Handler returns the handler that builds every reply, for tests.
func (s *Server) Handler() dns.Handler { return dns.HandlerFunc(s.serveDNS) }

// Addrs returns the bound addresses, UDP then TCP for each listen address,
// then each TLS address, once Start has returned.
func (s *Server) Addrs() []net.Addr { return s.addrs }

// TCPLimits returns the TCP limits in force, defaults filled in.
func (s *Server) TCPLimits() TCPLimits { return s.tcp.lim }

// recoverPanic, deferred, stops a panic of the datagram or connection
// being served (where: "udp" or "tcp"), so that a bug one query reaches
// costs that query, not the server: it logs the panic with its stack and
// reports it to OnPanic.
func (s *Server) recoverPanic(where string) {
	r := recover()
	if r == nil {
		return
	}
	slog.Error("fallback: recovered from a panic serving a query", "where", where, "panic", r, "stack", string(debug.Stack()))
	s.opts.OnPanic(where)
}

// Start binds UDP and TCP on every listen address and serves them until
// Shutdown. It returns once all are bound and serving.
func (s *Server) Start() error {
	var lns []*net.TCPListener
	// Each UDP loop holds a P while it waits (udp.go): the sockets per
	// address share the Ps but one that no other server's loops hold,
	// among the listen addresses, at least one each. serve keeps one P
	// more than its CPUs, so that is a socket per CPU for one address.
	per := max(1, udpProcs.spare()/max(1, len(s.opts.Listen)))
	for _, ap := range s.opts.Listen {
		socks, l, err := listen(ap, per)
		if err != nil {
			s.closeAll(lns)
			return err
		}
		lns = append(lns, l)
		s.addrs = append(s.addrs, socks[0].local, l.Addr())
		for i, sk := range socks {
			u, err := newUDPServer(s, sk.fd, sk.local)
			if err != nil {
				for _, sk := range socks[i+1:] {
					unix.Close(sk.fd)
				}
				s.closeAll(append(lns, l))
				return fmt.Errorf("setting up udp %s: %w", ap, err)
			}
			s.udp = append(s.udp, u)
		}
	}
	var tlsLns []*net.TCPListener
	if t := s.opts.TLS; t != nil {
		for _, ap := range t.Listen {
			l, err := reusePort.Listen(context.Background(), "tcp", ap.String())
			if err != nil {
				s.closeAll(append(lns, tlsLns...))
				return fmt.Errorf("listening for tls on %s: %w", ap, err)
			}
			tlsLns = append(tlsLns, l.(*net.TCPListener))
			s.addrs = append(s.addrs, l.Addr())
		}
	}
	for _, l := range lns {
		s.tcp.serve(l, nil)
	}
	for _, l := range tlsLns {
		s.tcp.serve(l, s.opts.TLS.Config)
	}
	udpProcs.reserve(len(s.udp))
	for _, u := range s.udp {
		u.start()
	}
	return nil
}

// loopProcs counts the UDP loops running in the process, over all
// servers, each holding a P while it waits, and keeps GOMAXPROCS above
// them: the API, the health checks and pushes, timers and the
// collector's workers need Ps, which would otherwise wait for the
// preemption of a loop (every 10 ms, by Go's monitor).
type loopProcs struct {
	sync.Mutex
	loops int
}

var udpProcs loopProcs

// spare is the Ps that loops may take: all but one, less those the
// running loops hold.
func (p *loopProcs) spare() int {
	p.Lock()
	defer p.Unlock()
	return runtime.GOMAXPROCS(0) - 1 - p.loops
}

// reserve counts n more loops and raises GOMAXPROCS, if it must, to the
// loops plus a P per CPU: a loop's P does nothing while it waits in the
// kernel, and a host that probes thousands of backends or aggregates
// many checkers beside its DNS service must not have its other work
// confined to one P while the DNS traffic is idle. The kernel shares the
// CPUs between the loops' threads and the rest.
func (p *loopProcs) reserve(n int) {
	p.Lock()
	defer p.Unlock()
	p.loops += n
	if want := p.loops + runtime.NumCPU(); runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}

// release uncounts a stopped loop. GOMAXPROCS stays: lowering it would
// take a P from whatever the process runs meanwhile, for no gain.
func (p *loopProcs) release() {
	p.Lock()
	p.loops--
	p.Unlock()
}

// Shutdown stops every listener and waits, until ctx is done, for the
// queries in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	for _, u := range s.udp {
		if err := u.close(); err != nil {
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
		u.close()
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

// udpSocket is a bound UDP socket outside Go's netpoller.
type udpSocket struct {
	fd    int
	local *net.UDPAddr
}

// listen binds n UDP sockets and one TCP listener on ap, all with
// SO_REUSEPORT. For port 0 the kernel picks the first UDP socket's port,
// and the rest take the same one, so that one address serves both.
func listen(ap netip.AddrPort, n int) ([]udpSocket, *net.TCPListener, error) {
	for try := 1; ; try++ {
		first, err := bindUDP(ap)
		if err != nil {
			return nil, nil, err
		}
		port := netip.AddrPortFrom(ap.Addr(), uint16(first.local.Port))
		l, err := reusePort.Listen(context.Background(), "tcp", port.String())
		if err != nil {
			unix.Close(first.fd)
			if ap.Port() != 0 || try == portTries || !errors.Is(err, syscall.EADDRINUSE) {
				return nil, nil, fmt.Errorf("listening on tcp %s: %w", port, err)
			}
			continue
		}
		socks := []udpSocket{first}
		for len(socks) < n {
			sk, err := bindUDP(port)
			if err != nil {
				for _, sk := range socks {
					unix.Close(sk.fd)
				}
				l.Close()
				return nil, nil, err
			}
			socks = append(socks, sk)
		}
		return socks, l.(*net.TCPListener), nil
	}
}

// bindUDP binds a blocking UDP socket on ap with SO_REUSEPORT, made with
// socket(2) so that Go's netpoller never registers it (udp.go says why).
// It binds as the net package does for the TCP listener beside it: a
// wildcard address of either family is a dual-stack IPv6 socket, so that
// UDP and TCP serve the same families, or IPv4 alone on a host without
// IPv6.
func bindUDP(ap netip.AddrPort) (udpSocket, error) {
	sk, err := bindUDPFamily(ap)
	if err != nil {
		return udpSocket{}, fmt.Errorf("listening on udp %s: %w", ap, err)
	}
	return sk, nil
}

func bindUDPFamily(ap netip.AddrPort) (udpSocket, error) {
	addr := ap.Addr().Unmap()
	wildcard := addr.IsUnspecified()
	family := unix.AF_INET
	if addr.Is6() || wildcard {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err == unix.EAFNOSUPPORT && wildcard && addr.Is4() {
		family = unix.AF_INET
		fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return udpSocket{}, fmt.Errorf("opening a socket: %w", err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: addr.As4()}
	} else {
		sa6 := &unix.SockaddrInet6{Port: int(ap.Port())}
		if !wildcard {
			sa6.Addr = addr.As16()
		}
		if z := addr.Zone(); z != "" {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				unix.Close(fd)
				return udpSocket{}, fmt.Errorf("finding the zone's interface: %w", err)
			}
			sa6.ZoneId = uint32(ifi.Index)
		}
		sa = sa6
		// Dual-stack, as the net package makes a socket of network "udp".
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	}
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}
	if err == nil {
		err = unix.Bind(fd, sa)
	}
	var bound unix.Sockaddr
	if err == nil {
		bound, err = unix.Getsockname(fd)
	}
	if err != nil {
		unix.Close(fd)
		return udpSocket{}, err
	}
	local := &net.UDPAddr{}
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		local.IP, local.Port = net.IP(b.Addr[:]), b.Port
	case *unix.SockaddrInet6:
		local.IP, local.Port = net.IP(b.Addr[:]), b.Port
		if b.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(b.ZoneId)); err == nil {
				local.Zone = ifi.Name
			}
		}
	}
	return udpSocket{fd: fd, local: local}, nil
}
