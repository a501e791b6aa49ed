package compliance

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// Check judges reply, the raw answer to c's query for zone (asking for
// qtype instead when that is non-zero, as in Query), by genreport's rules
// for a server that is not recursive. It returns genreport's tags for
// what is wrong, empty when the reply passes.
func Check(c Case, zone string, qtype uint16, reply []byte) []string {
	if qtype == 0 {
		qtype = c.Qtype
	}
	var tags []string
	fail := func(tag string) { tags = append(tags, tag) }
	m := new(dns.Msg)
	if len(reply) < 12 || m.Unpack(reply) != nil {
		return []string{"malformed"}
	}
	query := c.Opcode == dns.OpcodeQuery

	// An opcode other than QUERY is answered with every section empty.
	if !query {
		for _, s := range []struct {
			n   int
			tag string
		}{{len(m.Question), "question"}, {len(m.Answer), "answer"}, {len(m.Ns), "authority"}, {len(m.Extra), "additional"}} {
			if s.n != 0 {
				fail("non-empty-" + s.tag + "-section")
			}
		}
	}
	for _, q := range m.Question {
		if !strings.EqualFold(q.Name, dns.Fqdn(zone)) || q.Qtype != qtype {
			fail("mismatch")
		}
	}
	seenSOA, seenRRSIG := false, false
	for _, rr := range m.Answer {
		switch rr.Header().Rrtype {
		case dns.TypeSOA:
			seenSOA = seenSOA || strings.EqualFold(rr.Header().Name, dns.Fqdn(zone))
		case dns.TypeRRSIG:
			seenRRSIG = true
		}
	}

	var opt *dns.OPT
	seenEcho, seenCookie := false, false
	for _, rr := range m.Extra {
		o, ok := rr.(*dns.OPT)
		if !ok {
			continue
		}
		if opt != nil {
			return append(tags, "malformed") // a second OPT
		}
		opt = o
		for _, e := range o.Option {
			switch e := e.(type) {
			case *dns.EDNS0_LOCAL:
				seenEcho = seenEcho || e.Code == 100
			case *dns.EDNS0_COOKIE:
				b, err := hex.DecodeString(e.Cookie)
				if err != nil || len(b) < 16 || len(b) > 40 {
					break
				}
				seenCookie = true
				// A server cookie must come back with the client's.
				if c.Cookie && !bytes.Equal(b[:8], clientCookie) {
					fail("cookie-mismatch")
				}
			}
		}
	}
	var ednsTTL uint32
	if opt != nil {
		ednsTTL = opt.Hdr.Ttl
	}
	rcode := m.Rcode // miekg/dns already adds the OPT's extended rcode bits

	if m.Opcode != c.Opcode {
		fail(opcodeText(m.Opcode))
	}
	if c.Version == 0 {
		if query && rcode != dns.RcodeSuccess && (!c.Cookie || rcode != dns.RcodeBadCookie || !seenCookie) {
			fail(rcodeText(rcode))
		}
		if !query && rcode != dns.RcodeNotImplemented {
			fail(rcodeText(rcode))
		}
	} else if rcode != dns.RcodeBadVers {
		fail(rcodeText(rcode))
	}
	vers := uint8(ednsTTL >> 16)
	if opt != nil && vers != 0 {
		fail("version-not-zero")
	}
	if opt != nil && ((vers < c.Version && rcode != dns.RcodeBadVers) || (vers >= c.Version && rcode == dns.RcodeBadVers)) {
		fail("badversion")
	}
	if opt == nil && c.UDPSize != 0 {
		fail("noopt")
	}
	if opt != nil && c.UDPSize == 0 {
		fail("opt")
	}
	if qtype == dns.TypeSOA && c.Version == 0 && !c.IgnoreTC && !seenSOA && rcode == dns.RcodeSuccess {
		fail("nosoa")
	}
	if qtype == dns.TypeSOA && seenSOA && (c.Version != 0 || rcode != dns.RcodeSuccess) {
		fail("soa")
	}
	if seenEcho {
		fail("echoed")
	}
	if opt != nil && c.EDNSFlags&do != 0 && ednsTTL&do == 0 && seenRRSIG {
		fail("nodo")
	}
	if opt != nil && c.EDNSFlags&do != 0 && c.CD && ednsTTL&do != 0 && !m.CheckingDisabled && seenRRSIG {
		fail("nocd")
	}
	// AA, RA, RD, AD and CD are defined for QUERY only.
	if !m.Authoritative && c.Version == 0 && rcode == dns.RcodeSuccess && query {
		fail("noaa")
	}
	if m.Authoritative && !query {
		fail("aa")
	}
	if m.RecursionAvailable && !query {
		fail("ra")
	}
	if m.RecursionDesired && (!query || !c.RD) {
		fail("rd")
	}
	if !m.RecursionDesired && c.RD && query {
		fail("nord")
	}
	if m.AuthenticatedData && (!query || (!c.AD && c.EDNSFlags&do == 0)) {
		fail("ad")
	}
	if m.CheckingDisabled && (!query || !c.CD) {
		fail("cd")
	}
	if m.Zero {
		fail("z") // RFC 1035: the reserved bit is not echoed
	}
	if ednsTTL&0x7fff != 0 {
		fail("mbz") // only DO is defined
	}
	limit := int(c.UDPSize)
	if limit == 0 {
		limit = dns.MinMsgSize
	}
	if c.IgnoreTC && len(reply) > limit {
		fail("toobig")
	}
	return tags
}

func opcodeText(op int) string {
	if s, ok := dns.OpcodeToString[op]; ok {
		return strings.ToLower(s)
	}
	return fmt.Sprintf("opcode%d", op)
}

func rcodeText(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return strings.ToLower(s)
	}
	return fmt.Sprintf("rcode%d", rc)
}
