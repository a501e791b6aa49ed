package fallback

import (
	"encoding/hex"
	"time"

	"github.com/miekg/dns"
)

// queryOPT returns the query's OPT record, or nil. ok is false when OPT
// records are present but unusable: more than one, or one outside the
// additional section (RFC 6891 §6.1.1), which is answered with FORMERR.
func queryOPT(r *dns.Msg) (opt *dns.OPT, ok bool) {
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeOPT {
				return nil, false
			}
		}
	}
	for _, rr := range r.Extra {
		if o, is := rr.(*dns.OPT); is {
			if opt != nil {
				return nil, false
			}
			opt = o
		}
	}
	return opt, true
}

// replyOPT returns the OPT of a reply to a query that had q: version 0,
// our UDP size, DO copied, and no options; ECS and NSID are added later.
// Unknown options, and COOKIE, which steadydns does not implement, are
// ignored (RFC 6891 §6.1.2, RFC 7873 §5.2).
func replyOPT(q *dns.OPT) *dns.OPT {
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(uint16(ednsSize))
	if q.Do() {
		o.SetDo()
	}
	return o
}

// udpLimit returns the largest UDP reply to r: 512 bytes without EDNS,
// else the client's size within 512 and ednsSize (RFC 6891 §6.2.5).
func udpLimit(r *dns.Msg) int {
	opt, _ := queryOPT(r)
	if opt == nil {
		return udpSize
	}
	return max(udpSize, min(int(opt.UDPSize()), ednsSize))
}

// subnet returns the query's ECS option (RFC 7871), or nil.
func subnet(opt *dns.OPT) *dns.EDNS0_SUBNET {
	if opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			return e
		}
	}
	return nil
}

// nsidOption is the NSID option (RFC 5001) replies carry for value, or
// nil when value is empty and NSID is off.
func nsidOption(value []byte) *dns.EDNS0_NSID {
	if len(value) == 0 {
		return nil
	}
	return &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: hex.EncodeToString(value)}
}

// wantsNSID reports whether the query's OPT asks for the server's NSID:
// it carries the option, whose payload, which a client sends empty, is
// ignored (RFC 5001 §2.1).
func wantsNSID(opt *dns.OPT) bool {
	for _, o := range opt.Option {
		if o.Option() == dns.EDNS0NSID {
			return true
		}
	}
	return false
}

// keepaliveOption is the edns-tcp-keepalive option (RFC 7828) TCP replies
// carry when the query asked for it: the idle timeout, in units of 100 ms,
// after which the server closes a connection that has no query in hand.
// A resolver that keeps its connection open learns how long it may.
func keepaliveOption(idle time.Duration) *dns.EDNS0_TCP_KEEPALIVE {
	// At least 1: a reply's option carries a TIMEOUT, and miekg/dns
	// packs 0 as none.
	return &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: uint16(max(min(idle/(100*time.Millisecond), 0xffff), 1))}
}

// wantsKeepalive reports whether the query's OPT carries the
// edns-tcp-keepalive option; over UDP it is ignored (RFC 7828 §3.2.1).
func wantsKeepalive(opt *dns.OPT) bool {
	for _, o := range opt.Option {
		if o.Option() == dns.EDNS0TCPKEEPALIVE {
			return true
		}
	}
	return false
}
