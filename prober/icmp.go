package prober

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// icmpChecker sends one echo request and waits for the matching reply. It
// prefers an unprivileged ping socket (SOCK_DGRAM, allowed by the sysctl
// net.ipv4.ping_group_range), where the kernel owns the identifier and
// delivers only this socket's replies, and falls back to a raw socket,
// which needs CAP_NET_RAW and sees every ICMP packet of the namespace.
// Replies are matched by identifier (raw sockets), sequence number and a
// random payload, so concurrent pings to one host never take each other's
// replies.
type icmpChecker struct {
	probe
	id  uint16
	seq atomic.Uint32
	raw [2]atomic.Bool // per family (0 IPv4, 1 IPv6): ping sockets are refused, use raw
}

func newICMP(p probe) *icmpChecker {
	return &icmpChecker{probe: p, id: uint16(rand.Uint32())}
}

// icmpFamily is what differs between ICMPv4 and ICMPv6.
type icmpFamily struct {
	proto         int // for icmp.ParseMessage
	dgram, raw    string
	any           string
	request       icmp.Type
	reply         icmp.Type
	innerIPHeader func(b []byte) int // length of the IP header quoted in an error
}

var families = [2]icmpFamily{
	{proto: 1, dgram: "udp4", raw: "ip4:icmp", any: "0.0.0.0", request: ipv4.ICMPTypeEcho, reply: ipv4.ICMPTypeEchoReply,
		innerIPHeader: func(b []byte) int { return int(b[0]&0x0f) * 4 }},
	{proto: 58, dgram: "udp6", raw: "ip6:ipv6-icmp", any: "::", request: ipv6.ICMPTypeEchoRequest, reply: ipv6.ICMPTypeEchoReply,
		innerIPHeader: func([]byte) int { return ipv6.HeaderLen }},
}

func (p *icmpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel, ap, err := p.begin(ctx)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer cancel()
	f := 0
	if ap.Addr().Is6() {
		f = 1
	}
	c, raw, err := p.listen(f)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer watch(ctx, c)()

	seq := uint16(p.seq.Add(1))
	data := binary.LittleEndian.AppendUint64(nil, rand.Uint64())
	msg := icmp.Message{Type: families[f].request, Body: &icmp.Echo{ID: int(p.id), Seq: int(seq), Data: data}}
	b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
	if err != nil {
		return failErr(ctx, start, err)
	}
	var to net.Addr = &net.UDPAddr{IP: ap.Addr().AsSlice()}
	if raw {
		to = &net.IPAddr{IP: ap.Addr().AsSlice()}
	}
	if _, err := c.WriteTo(b, to); err != nil {
		return failErr(ctx, start, err)
	}
	buf := replies.Get().(*[replyLimit]byte)
	defer replies.Put(buf)
	for {
		n, from, err := c.ReadFrom(buf[:])
		if err != nil {
			return failErr(ctx, start, err)
		}
		switch p.match(f, raw, buf[:n], from, ap.Addr(), seq, data) {
		case echoReply:
			return pass(start)
		case unreachable:
			return fail(start, ReasonUnreachable, "icmp destination unreachable")
		}
	}
}

// listen opens a ping socket for family f, or a raw one when ping sockets
// are refused; it remembers the refusal so later runs go straight to raw.
func (p *icmpChecker) listen(f int) (*icmp.PacketConn, bool, error) {
	fam := families[f]
	var c *icmp.PacketConn
	open := func(network string) func() error {
		return func() error {
			var err error
			c, err = icmp.ListenPacket(network, fam.any)
			return err
		}
	}
	if !p.raw[f].Load() {
		err := p.in(open(fam.dgram))
		if err == nil {
			return c, false, nil
		}
		if !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EPROTONOSUPPORT) {
			return nil, false, err
		}
		p.raw[f].Store(true)
	}
	if err := p.in(open(fam.raw)); err != nil {
		return nil, true, fmt.Errorf("opening raw icmp socket: %w", err)
	}
	return c, true, nil
}

type verdict int

const (
	unrelated verdict = iota
	echoReply
	unreachable
)

// match judges one packet read from the socket: our echo reply, an error
// quoting our request, or someone else's traffic.
func (p *icmpChecker) match(f int, raw bool, b []byte, from net.Addr, target netip.Addr, seq uint16, data []byte) verdict {
	fam := families[f]
	m, err := icmp.ParseMessage(fam.proto, b)
	if err != nil {
		return unrelated
	}
	switch body := m.Body.(type) {
	case *icmp.Echo:
		ok := m.Type == fam.reply && uint16(body.Seq) == seq && bytes.Equal(body.Data, data) &&
			(!raw || uint16(body.ID) == p.id) && addrOf(from) == target
		if ok {
			return echoReply
		}
	case *icmp.DstUnreach:
		if raw && p.quotes(fam, body.Data, seq) {
			return unreachable
		}
	case *icmp.TimeExceeded:
		if raw && p.quotes(fam, body.Data, seq) {
			return unreachable
		}
	}
	return unrelated
}

// quotes reports whether an ICMP error quotes our echo request: the
// original IP header, then the request's type, code, checksum, id and seq.
func (p *icmpChecker) quotes(fam icmpFamily, q []byte, seq uint16) bool {
	if len(q) == 0 {
		return false
	}
	h := fam.innerIPHeader(q)
	if len(q) < h+8 {
		return false
	}
	e := q[h:]
	return binary.BigEndian.Uint16(e[4:]) == p.id && binary.BigEndian.Uint16(e[6:]) == seq
}

func addrOf(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}
