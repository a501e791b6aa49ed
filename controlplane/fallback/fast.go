package fallback

import (
	"encoding/binary"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/zone"
)

// The wire fast path answers the common UDP query, an A or AAAA question
// for a set of the zone file or a health-checked set, straight from the
// datagram's bytes into the reply buffer, as the other authoritative
// servers do: unpacking the query into a dns.Msg and packing the reply
// from one are most of the handler's work (BenchmarkServeUDP, "zone A"
// against "zone MX", which the handler answers). It answers only what it
// is sure to answer byte for byte as the handler would, and declines the
// rest before it has done anything the handler would do again: no
// selection drawn, nothing observed or limited. TestFastEqualsSlow and
// FuzzFastPath hold it to that.

// fastQuery is a query the fast path has parsed.
type fastQuery struct {
	qend  int // offset just past the question
	qtype uint16
	rd    bool // RD and CD, echoed
	cd    bool
	edns  bool // the query has an OPT
	do    bool
	nsid  bool // the OPT carries an NSID option
	// keepalive: the OPT carries an edns-tcp-keepalive option that
	// parses (a TIMEOUT or none) and the query came over TCP.
	keepalive bool
	limit     int // the largest reply the client takes
	keyLen    int // the index key's length: the name's wire form and the qtype
}

// parseFast parses b, a datagram or TCP message of at least a header
// that is not a response, when it is a query the fast path answers:
// opcode QUERY, one question of class IN for A or AAAA whose name has
// only letters, digits, hyphens and underscores (so its presentation form
// is its labels joined by dots, as miekg/dns would spell it), no answer or
// authority records, and at most one additional record, an OPT of version
// 0 whose options hold no ECS, with nothing after it. ok is false for any
// other message.
// It writes the question's index key into key (wireIndex) as it reads the
// name: each byte is looked at once.
func parseFast(b []byte, key *[maxKey]byte) (q fastQuery, ok bool) {
	be := func(off int) int { return int(b[off])<<8 | int(b[off+1]) }
	if b[2]&0x78 != 0 || be(4) != 1 || be(6) != 0 || be(8) != 0 || be(10) > 1 {
		return q, false
	}
	q.rd, q.cd = b[2]&0x01 != 0, b[3]&0x10 != 0
	// The root name is not answered here: miekg/dns never compresses
	// it, so an answer's owner would not be a pointer.
	off := headerLen
	if off >= len(b) || b[off] == 0 {
		return q, false
	}
	for {
		if off >= len(b) {
			return q, false
		}
		n := int(b[off])
		if n == 0 {
			break
		}
		// A name of more than 255 bytes, its terminating zero
		// included, does not unpack; the key has room for 255.
		if n > 63 || off+1+n >= len(b) || off+1+n+1-headerLen > 255 {
			return q, false
		}
		k := key[off-headerLen:]
		k[0] = byte(n)
		for i, c := range b[off+1 : off+1+n] {
			if k[1+i] = plainLower[c]; k[1+i] == 0 {
				return q, false
			}
		}
		off += 1 + n
	}
	if off+5 > len(b) {
		return q, false
	}
	q.qtype = uint16(be(off + 1))
	if (q.qtype != dns.TypeA && q.qtype != dns.TypeAAAA) || be(off+3) != int(dns.ClassINET) {
		return q, false
	}
	q.qend = off + 5
	nl := off + 1 - headerLen
	key[nl-1], key[nl], key[nl+1] = 0, b[off+1], b[off+2]
	q.keyLen = nl + 2
	q.limit = udpSize
	if be(10) == 0 {
		return q, q.qend == len(b)
	}
	// The OPT: the root name, type, UDP size, extended rcode, version,
	// flags, and the options.
	o := q.qend
	if o+11 > len(b) || b[o] != 0 || be(o+1) != int(dns.TypeOPT) || b[o+5] != 0 || b[o+6] != 0 {
		return q, false
	}
	rdata, rend := o+11, o+11+be(o+9)
	if rend != len(b) {
		return q, false
	}
	for p := rdata; p < rend; {
		if p+4 > rend || p+4+be(p+2) > rend {
			return q, false
		}
		switch uint16(be(p)) {
		case dns.EDNS0SUBNET:
			// Selection depends on it, and a malformed one is FORMERR.
			return q, false
		case dns.EDNS0NSID:
			q.nsid = true
		case dns.EDNS0TCPKEEPALIVE:
			// Of another length it does not unpack, and the handler
			// parses the query again without it (dropOptions).
			q.keepalive = q.keepalive || be(p+2) == 0 || be(p+2) == 2
		}
		// Other options are ignored, as the handler ignores them.
		p += 4 + be(p+2)
	}
	q.edns, q.do = true, b[o+7]&0x80 != 0
	q.limit = max(udpSize, min(be(o+3), ednsSize))
	return q, true
}

// plainLower maps each byte that may stand in a label the fast path
// answers (letters, digits, '-' and '_') to its lowercase, and any other
// to 0.
var plainLower = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case 'A' <= c && c <= 'Z':
			t[c] = byte(c + 'a' - 'A')
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_':
			t[c] = byte(c)
		}
	}
	return t
}()

// qname returns the presentation form of the question's name in b, its
// case kept, as miekg/dns unpacks a name of plain labels.
func qname(b []byte) string {
	var buf [255]byte
	n := 0
	for off := headerLen; b[off] != 0; off += 1 + int(b[off]) {
		n += copy(buf[n:], b[off+1:off+1+int(b[off])])
		buf[n] = '.'
		n++
	}
	return string(buf[:n])
}

// answerFast answers the query b, a datagram or a TCP message, into w
// when the fast path can, and returns the query's qtype. ok is false when
// it declined: the handler answers then. It declines before it has done
// anything, except when a health-checked set's selection calls for what
// only the handler writes (the SOA of NODATA, truncation): then it leaves
// the selection in w's scratch for the handler to use. A question in the view's index is
// answered from it; any other goes through the zone's lookup, as the
// handler's would.
func (s *Server) answerFast(w *replyWriter, b []byte) (qtype uint16, ok bool) {
	start := w.clock()
	q, ok := parseFast(b, &w.key)
	if !ok {
		return 0, false
	}
	tcp := w.tcp()
	if tcp {
		q.limit = tcpSize
	}
	q.keepalive = q.keepalive && tcp
	sv := s.view.Load()
	v := sv.v
	if v == nil {
		return 0, false
	}
	var (
		name    string   // the question's presentation form, once built
		answers []byte   // a set of the zone file from the index, as written
		rrs     []dns.RR // or from the zone's lookup
		n       int      // the set's records
		dynName string   // or a health-checked set's name and type
		dynType uint16
	)
	if e, ok := sv.idx.find(w.key[:q.keyLen]); ok && !(e.signed && q.do) {
		answers, n, dynName, dynType = e.answers, e.n, e.dynName, e.dynType
	} else {
		name = qname(b)
		if d := &s.opts.Debug; d.Name != "" && under(name, d.Name) {
			return 0, false
		}
		z := v.Zones.Find(name)
		if z == nil {
			return 0, false
		}
		res := z.Lookup(name, q.qtype, q.do)
		switch {
		case res.Kind == zone.Answer && len(res.Ns) == 0 && len(res.Extra) == 0 && staticSet(res.Answer, name, q.qtype):
			rrs, n = res.Answer, len(res.Answer)
		case res.Kind == zone.Dynamic && res.DynamicType == q.qtype && len(res.Answer) == 0 && v.Records != nil && !(q.do && z.Online()):
			// Not a CNAME set's name: the handler follows the CNAME.
			dynName, dynType = res.DynamicName, res.DynamicType
		default:
			return 0, false
		}
	}
	var sel Selection
	kind := zone.Answer
	if dynName == "" {
		if fastLen(&q, s.opts.NSID, n) > q.limit {
			return 0, false
		}
	} else {
		var found bool
		sel, found = v.Records.Select(dynName, dynType, Query{Client: addrOf(w.remote)}, w.scratch.addrs[:0])
		switch {
		case !found || sel.Action == ServFail:
			kind = 0 // SERVFAIL
		case sel.Action == NoData || len(sel.Addrs) == 0 || fastLen(&q, s.opts.NSID, len(sel.Addrs)) > q.limit:
			// The handler writes the SOA, or truncates, from this
			// selection and this view.
			w.scratch.pre = preselected{v: v, sel: sel}
			return 0, false
		}
	}

	rcode, outcome, aa := dns.RcodeSuccess, OutcomeNoError, true
	if kind == 0 {
		rcode, outcome, aa = dns.RcodeServerFailure, OutcomeServFail, false
		answers, rrs, n, sel.Addrs = nil, nil, 0, nil
	}
	n += len(sel.Addrs)
	nsid := q.nsid && len(s.opts.NSID) > 0
	// Only UDP replies are limited, as the handler's.
	if s.opts.RRL != nil && !tcp {
		if name == "" {
			name = qname(b)
		}
		rp := Reply{Qname: name, Qtype: q.qtype, Rcode: rcode}
		switch s.opts.RRL.Limit(addrOf(w.remote), rp) {
		case Drop:
			s.observeReply(w, OutcomeRRLDropped, start)
			return q.qtype, true
		case Slip:
			n, outcome = 0, OutcomeRRLSlipped
		}
	}
	r := w.buf[:0]
	if w.inPlace {
		// Over the query: its header and question stay where they
		// are (the question's copy below is onto itself), and what
		// follows them has been read.
		r = b[:0]
	}
	// The header: ID, QR, opcode QUERY, AA, TC for a slipped reply, RD
	// and CD echoed, the rcode; one question, the answers, the OPT.
	flags := uint16(1 << 15)
	if aa {
		flags |= 1 << 10
	}
	if outcome == OutcomeRRLSlipped {
		flags |= 1 << 9
	}
	if q.rd {
		flags |= 1 << 8
	}
	if q.cd {
		flags |= 1 << 4
	}
	flags |= uint16(rcode)
	// A slipped reply is the header and the question alone (slip).
	edns := q.edns && outcome != OutcomeRRLSlipped
	ar := 0
	if edns {
		ar = 1
	}
	r = append(r, b[0], b[1], byte(flags>>8), byte(flags), 0, 1, byte(n>>8), byte(n), 0, 0, 0, byte(ar))
	r = append(r, b[headerLen:q.qend]...)
	if n > 0 {
		r = append(r, answers...)
		r = appendRRs(r, rrs)
		for _, a := range sel.Addrs {
			if q.qtype == dns.TypeA {
				ip := a.Unmap().As4()
				r = appendAddr(r, dns.TypeA, sel.TTL, ip[:])
			} else {
				ip := a.As16()
				r = appendAddr(r, dns.TypeAAAA, sel.TTL, ip[:])
			}
		}
	}
	if edns {
		var do byte
		if q.do {
			do = 0x80
		}
		rdlen := 0
		if nsid {
			rdlen = 4 + len(s.opts.NSID)
		}
		if q.keepalive {
			rdlen += 6
		}
		size := uint16(ednsSize)
		r = append(r, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT), byte(size>>8), byte(size), 0, 0, do, 0, byte(rdlen>>8), byte(rdlen))
		if nsid {
			l := len(s.opts.NSID)
			r = append(r, byte(dns.EDNS0NSID>>8), byte(dns.EDNS0NSID), byte(l>>8), byte(l))
			r = append(r, s.opts.NSID...)
		}
		if q.keepalive {
			t := s.keepalive.Timeout
			r = append(r, byte(dns.EDNS0TCPKEEPALIVE>>8), byte(dns.EDNS0TCPKEEPALIVE), 0, 2, byte(t>>8), byte(t))
		}
	}
	s.observeReply(w, outcome, start)
	w.reply = r
	return q.qtype, true
}

// staticSet reports whether rrs is a set of the zone file the fast path
// writes: records of type qtype, class IN, each owned by name as asked,
// so that each owner is a pointer to the question.
func staticSet(rrs []dns.RR, name string, qtype uint16) bool {
	if len(rrs) == 0 {
		return false
	}
	for _, rr := range rrs {
		h := rr.Header()
		if h.Rrtype != qtype || h.Class != dns.ClassINET || h.Name != name {
			return false
		}
		switch rr := rr.(type) {
		case *dns.A:
			if rr.A.To4() == nil {
				return false
			}
		case *dns.AAAA:
			if len(rr.AAAA) != 16 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// fastLen is the length of the reply to q with n answers of q's type.
func fastLen(q *fastQuery, nsid []byte, n int) int {
	rdata := 4
	if q.qtype == dns.TypeAAAA {
		rdata = 16
	}
	l := q.qend + n*(12+rdata)
	if q.edns {
		l += 11
		if q.nsid && len(nsid) > 0 {
			l += 4 + len(nsid)
		}
		if q.keepalive {
			l += 6
		}
	}
	return l
}

// appendAddr appends an A or AAAA record owned by the question's name: a
// pointer to offset 12.
func appendAddr(r []byte, t uint16, ttl uint32, ip []byte) []byte {
	r = append(r, 0xC0, headerLen, byte(t>>8), byte(t), 0, byte(dns.ClassINET))
	r = binary.BigEndian.AppendUint32(r, ttl)
	r = append(r, 0, byte(len(ip)))
	return append(r, ip...)
}

// preselected is a selection the fast path drew before it declined, with
// the view it drew it from: the handler answers from both, so the query
// draws once, as it would without the fast path. v is nil when there is
// none.
type preselected struct {
	v   *View
	sel Selection
}
