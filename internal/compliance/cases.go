// Package compliance holds the queries that ISC's DNS-Compliance-Testing
// tool, genreport, sends to an authoritative server, and the checks it
// applies to each reply, so that tests and the benchmark can hold any
// server to them over the wire without the C tool.
package compliance

import "github.com/miekg/dns"

// Case is one of genreport's tests: the query it sends. The fields follow
// the columns of genreport's test table.
type Case struct {
	Name string
	// UDPSize is the OPT's UDP size; 0 sends no OPT.
	UDPSize uint16
	// EDNSFlags are the OPT's flags (0x8000 is DO).
	EDNSFlags uint16
	Version   uint8
	// Options is the OPT's RDATA, as genreport writes it byte for byte.
	Options []byte
	TCP     bool
	// Cookie: the query carries a client cookie, and BADCOOKIE with a
	// server cookie is an acceptable reply.
	Cookie bool
	// IgnoreTC: a truncated UDP reply is judged as it is, not retried
	// over TCP, and must fit the query's UDP size.
	IgnoreTC bool
	// Header bits set in the query.
	TC, RD, RA, CD, AD, AA, Z bool
	// Opcode other than QUERY sends a header alone, with no question.
	Opcode int
	// Qtype asked for at the zone's apex.
	Qtype uint16
}

// Options genreport sends, byte for byte.
var (
	optNSID   = []byte{0x00, 0x03, 0x00, 0x00}
	optECS    = []byte{0x00, 0x08, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00} // family 1, 0.0.0.0/0
	optExpire = []byte{0x00, 0x09, 0x00, 0x00}
	optCookie = []byte{0x00, 0x0a, 0x00, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	opt100    = []byte{0x00, 0x64, 0x00, 0x00} // an unassigned option, which must not be echoed
	// clientCookie is the client cookie inside optCookie.
	clientCookie = optCookie[4:]
)

const do = 0x8000

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// Cases are the tests genreport runs in its full mode (the table's EDNS,
// FULL and COMM groups), in its order. Its table also has "dnswkk" (a
// query signed with TSIG under the proposed well-known key) and "icmp"
// (a ping), which it runs only on request; neither is a header or EDNS
// rule of plain DNS, so they are left out.
var Cases = []Case{
	{Name: "dns", Qtype: dns.TypeSOA},
	{Name: "aa", AA: true, Qtype: dns.TypeSOA},
	{Name: "ad", AD: true, Qtype: dns.TypeSOA},
	{Name: "cd", CD: true, Qtype: dns.TypeSOA},
	{Name: "ra", RA: true, Qtype: dns.TypeSOA},
	{Name: "rd", RD: true, Qtype: dns.TypeSOA},
	{Name: "tc", TC: true, Qtype: dns.TypeSOA},
	{Name: "zflag", Z: true, Qtype: dns.TypeSOA},
	{Name: "opcode", Opcode: 15},
	{Name: "opcodeflg", TC: true, RD: true, RA: true, CD: true, AD: true, AA: true, Z: true, Opcode: 15},
	{Name: "type666", Qtype: 666},
	{Name: "tcp", TCP: true, Qtype: dns.TypeSOA},

	{Name: "edns", UDPSize: 4096, Qtype: dns.TypeSOA},
	{Name: "edns1", UDPSize: 4096, Version: 1, Qtype: dns.TypeSOA},
	{Name: "edns@512", UDPSize: 512, IgnoreTC: true, Qtype: dns.TypeDNSKEY},
	{Name: "ednsopt", UDPSize: 4096, Options: opt100, Qtype: dns.TypeSOA},
	{Name: "edns1opt", UDPSize: 4096, Version: 1, Options: opt100, Qtype: dns.TypeSOA},
	{Name: "do", UDPSize: 4096, EDNSFlags: do, Qtype: dns.TypeSOA},
	{Name: "docd", UDPSize: 4096, EDNSFlags: do, CD: true, Qtype: dns.TypeSOA},
	{Name: "edns1do", UDPSize: 4096, EDNSFlags: do, Version: 1, Qtype: dns.TypeSOA},
	{Name: "ednsflags", UDPSize: 4096, EDNSFlags: 0x0080, Qtype: dns.TypeSOA},
	{Name: "optlist", UDPSize: 4096, Options: cat(optNSID, optECS, optExpire, optCookie), Cookie: true, Qtype: dns.TypeSOA},

	{Name: "ednsnsid", UDPSize: 4096, Options: optNSID, Qtype: dns.TypeSOA},
	{Name: "ednscookie", UDPSize: 4096, Options: optCookie, Cookie: true, Qtype: dns.TypeSOA},
	{Name: "ednsexpire", UDPSize: 4096, Options: optExpire, Qtype: dns.TypeSOA},
	{Name: "ednssubnet", UDPSize: 4096, Options: optECS, Qtype: dns.TypeSOA},
	{Name: "edns1nsid", UDPSize: 4096, Version: 1, Options: optNSID, Qtype: dns.TypeSOA},
	{Name: "edns1cookie", UDPSize: 4096, Version: 1, Options: optCookie, Cookie: true, Qtype: dns.TypeSOA},
	{Name: "edns1expire", UDPSize: 4096, Version: 1, Options: optExpire, Qtype: dns.TypeSOA},
	{Name: "edns1subnet", UDPSize: 4096, Version: 1, Options: optECS, Qtype: dns.TypeSOA},
	{Name: "ednstcp", UDPSize: 512, EDNSFlags: do, TCP: true, Qtype: dns.TypeDNSKEY},

	{Name: "bind11", UDPSize: 4096, EDNSFlags: do, Options: optCookie, Cookie: true, Qtype: dns.TypeSOA},
	{Name: "dig11", UDPSize: 4096, Options: optCookie, Cookie: true, RD: true, AD: true, Qtype: dns.TypeSOA},
}

// Query returns the case's query for zone, with id as its ID. With qtype
// non-zero a query that has a question asks for qtype instead of the
// case's own type, so the same header and EDNS rules can be put to an
// answer some other path builds (steadydns's XDP program answers A and
// AAAA only).
func (c Case) Query(zone string, qtype uint16, id uint16) *dns.Msg {
	m := &dns.Msg{MsgHdr: dns.MsgHdr{
		Id: id, Opcode: c.Opcode, Truncated: c.TC, RecursionDesired: c.RD, RecursionAvailable: c.RA,
		CheckingDisabled: c.CD, AuthenticatedData: c.AD, Authoritative: c.AA, Zero: c.Z,
	}}
	if c.Opcode == dns.OpcodeQuery {
		if qtype == 0 {
			qtype = c.Qtype
		}
		m.Question = []dns.Question{{Name: dns.Fqdn(zone), Qtype: qtype, Qclass: dns.ClassINET}}
	}
	if c.UDPSize != 0 {
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: c.UDPSize,
			Ttl: uint32(c.Version)<<16 | uint32(c.EDNSFlags)}}
		// Each option goes as it is: a local option packs its code,
		// length and data unchanged, whatever the code.
		for b := c.Options; len(b) >= 4; {
			code, n := uint16(b[0])<<8|uint16(b[1]), int(b[2])<<8|int(b[3])
			opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: code, Data: b[4 : 4+n]})
			b = b[4+n:]
		}
		m.Extra = []dns.RR{opt}
	}
	return m
}
