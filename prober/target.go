package prober

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// target is where a check goes: a fixed address, or a hostname resolved on
// every run so a changed DNS record is followed.
type target struct {
	addr netip.AddrPort // valid when the target is an address
	host string         // hostname, or the address as text
	port uint16
}

func newTarget(s Spec, fallback netip.Addr) (target, error) {
	host := s.Target
	if host == "" {
		if !fallback.IsValid() {
			return target{}, fmt.Errorf("no target and no answer address")
		}
		host = fallback.String()
	}
	t := target{host: host, port: s.Port}
	if a, err := netip.ParseAddr(host); err == nil {
		t.addr = netip.AddrPortFrom(a.Unmap(), s.Port)
	}
	return t, nil
}

func (t *target) resolve(ctx context.Context) (netip.AddrPort, error) {
	if t.addr.IsValid() {
		return t.addr, nil
	}
	as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", t.host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolving %s: %w", t.host, err)
	}
	return netip.AddrPortFrom(as[0].Unmap(), t.port), nil
}

// hostPort is the target as a URL authority: the port is left out when it
// is the scheme's default.
func (t *target) hostPort(defaultPort uint16) string {
	h := t.host
	if t.addr.IsValid() && t.addr.Addr().Is6() {
		h = "[" + h + "]"
	}
	if t.port == defaultPort {
		return h
	}
	return h + ":" + strconv.Itoa(int(t.port))
}
