package prober

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// dnsChecker asks one question over UDP, and again over TCP when the reply
// is truncated, then judges the rcode and, if set, the answer data.
type dnsChecker struct {
	probe
	qname  string
	qtype  uint16
	rcode  int
	answer string // substring of some answer's rdata; empty accepts any
}

func (d *dnsChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel, ap, err := d.begin(ctx)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer cancel()
	q := new(dns.Msg).SetQuestion(d.qname, d.qtype)
	q.RecursionDesired = false // the target is authoritative
	r, err := d.exchange(ctx, "udp", ap, q)
	if err == nil && r.Truncated {
		r, err = d.exchange(ctx, "tcp", ap, q)
	}
	if err != nil {
		return failErr(ctx, start, err)
	}
	if r.Rcode != d.rcode {
		return fail(start, ReasonRcode, "rcode "+dns.RcodeToString[r.Rcode])
	}
	if d.answer != "" && !d.answered(r) {
		return fail(start, ReasonAnswerMismatch, "answer mismatch")
	}
	return pass(start)
}

func (d *dnsChecker) exchange(ctx context.Context, network string, ap netip.AddrPort, q *dns.Msg) (*dns.Msg, error) {
	c, release, err := d.dial(ctx, network, ap)
	if err != nil {
		return nil, err
	}
	defer release()
	// The client skips replies whose id differs on UDP, so a late answer to
	// an earlier query is not taken for this one.
	r, _, err := new(dns.Client).ExchangeWithConnContext(ctx, q, &dns.Conn{Conn: c})
	return r, err
}

// answered reports whether some answer's rdata, in presentation format,
// holds the expected text.
func (d *dnsChecker) answered(r *dns.Msg) bool {
	for _, rr := range r.Answer {
		if strings.Contains(strings.TrimPrefix(rr.String(), rr.Header().String()), d.answer) {
			return true
		}
	}
	return false
}
