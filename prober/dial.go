package prober

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// dialer makes probe connections. Every TCP socket gets SO_LINGER 0 before
// it connects, so however it is closed, by us or by net when the dial
// times out after the handshake, the kernel sends RST and keeps no
// TIME_WAIT entry: 10,000 checks a second to one backend would otherwise
// exhaust the ephemeral ports within seconds, and a prober falling behind
// would collapse as the kernel searched an exhausted port range. Keepalive
// is off: a probe connection never lives long enough to use it, and it
// costs four setsockopt calls.
var dialer = net.Dialer{KeepAlive: -1, Control: lingerZero}

func lingerZero(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	}); cerr != nil {
		return cerr
	}
	return err
}

// connect connects to ap within ctx over "tcp" or "udp". Addresses stay
// netip values: the string-taking DialContext parses them back on every call.
func (p *probe) connect(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := p.in(func() error {
		var err error
		if network == "udp" {
			c, err = dialer.DialUDP(ctx, network, netip.AddrPort{}, ap)
		} else {
			c, err = dialer.DialTCP(ctx, network, netip.AddrPort{}, ap)
		}
		return err
	})
	if err != nil {
		return nil, err // not c, which may hold a typed nil
	}
	return c, nil
}

// dial connects to ap and arranges for ctx to bound every later read and
// write. The returned func closes the conn; call it exactly once.
func (p *probe) dial(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, func(), error) {
	c, err := p.connect(ctx, network, ap)
	if err != nil {
		return nil, nil, err
	}
	return c, watch(ctx, c), nil
}

// conn is what watch needs: net.Conn and net.PacketConn both fit.
type conn interface {
	SetDeadline(t time.Time) error
	Close() error
}

// watch sets c's deadline from ctx and, should ctx be cancelled before
// then (a reload stopping the check), expires it at once. The returned func
// closes c.
func watch(ctx context.Context, c conn) func() {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		c.Close()
	}
}
