// Package rrl is response rate limiting for the fallback: it keys each
// reply as the XDP program does and accounts it, through the loader, in
// the map XDP accounts its own replies in.
package rrl

import (
	"net/netip"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/loader"
)

// Options turns server.rrl into the loader's settings, which the program
// is loaded with; nil (off) gives the zero value.
func Options(c *config.RRL) loader.RRL {
	if c == nil {
		return loader.RRL{}
	}
	return loader.RRL{Rate: c.Rate, Slip: c.Slip, Window: c.Window, IPv4Prefix: c.IPv4Prefix, IPv6Prefix: c.IPv6Prefix, Exempt: c.Exempt, TableSize: c.TableSize}
}

// Accounts is the shared state: loader.Objects.
type Accounts interface {
	RRLAccount(client netip.Addr, resp uint64, now uint64) loader.RRLVerdict
}

// Limiter is the fallback's fallback.Limiter.
type Limiter struct{ a Accounts }

// New returns a limiter that accounts in a.
func New(a Accounts) *Limiter { return &Limiter{a: a} }

// Limit implements fallback.Limiter.
func (l *Limiter) Limit(client netip.Addr, r fallback.Reply) fallback.Verdict {
	switch l.a.RRLAccount(client, Resp(r), loader.BootNs()) {
	case loader.RRLSlip:
		return fallback.Slip
	case loader.RRLDrop:
		return fallback.Drop
	}
	return fallback.Send
}

// Resp is what a reply is keyed by besides the client's prefix, as XDP
// keys it: an answer, NODATA or a referral by the query's name and type,
// NXDOMAIN by its zone, any other error by its rcode.
func Resp(r fallback.Reply) uint64 {
	switch r.Rcode {
	case dns.RcodeSuccess:
		if w, ok := wire(r.Qname); ok {
			return loader.RRLAnswer(w, r.Qtype)
		}
	case dns.RcodeNameError:
		if w, ok := wire(r.Zone); ok {
			return loader.RRLNXDomain(w)
		}
	}
	return loader.RRLError(r.Rcode)
}

// wire is a name's wire form with ASCII letters lowercased, as XDP
// lowercases the question's bytes.
func wire(name string) (string, bool) {
	var buf [256]byte
	n, err := dns.PackDomainName(dns.Fqdn(name), buf[:], 0, nil, false)
	if err != nil || name == "" {
		return "", false
	}
	b := buf[:n]
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b), true
}
