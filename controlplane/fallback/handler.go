package fallback

import (
	"net"
	"net/netip"
	"slices"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/zone"
)

// Sizes of replies: what UDP carries without EDNS (RFC 1035 §4.2.1), the
// UDP size steadydns advertises and accepts at most (the DNS flag day 2020
// value, which avoids fragments; XDP advertises the same), and the TCP
// limit.
const (
	udpSize  = dns.MinMsgSize
	ednsSize = int(bpf.SteadydnsLimitsEDNS_UDP_SIZE)
	tcpSize  = dns.MaxMsgSize
)

func (s *Server) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	// A UDP loop packs each reply before it reads the next query, so it
	// lends the handler memory to build replies in; other writers do not.
	var sc *scratch
	u, _ := w.(*replyWriter)
	if u != nil {
		sc = &u.scratch
	}
	start := u.clock()
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	m, outcome := s.reply(r, addrOf(w.RemoteAddr()), tcp, sc)
	limit := tcpSize
	if !tcp {
		limit = udpLimit(r)
	}
	if truncate(m, limit, outcome == OutcomeReferral) {
		outcome = OutcomeTruncated
	}
	// Only UDP replies are limited: a TCP client has shown its address
	// is its own, and a slipped reply sends clients there.
	if !tcp && s.opts.RRL != nil {
		switch s.opts.RRL.Limit(addrOf(w.RemoteAddr()), s.limited(r, m)) {
		case Drop:
			s.observeReply(u, OutcomeRRLDropped, start)
			return
		case Slip:
			slip(m)
			outcome = OutcomeRRLSlipped
		}
	}
	// Counted before the write, so a client that reads the metrics after
	// its reply always sees its own query counted.
	s.observeReply(u, outcome, start)
	// A failed write leaves nothing to do: the client retries or gives up.
	_ = w.WriteMsg(m)
}

// limited describes reply m to r for the rate limiter.
func (s *Server) limited(r, m *dns.Msg) Reply {
	rp := Reply{Rcode: m.Rcode}
	if len(r.Question) == 1 {
		rp.Qname, rp.Qtype = r.Question[0].Name, r.Question[0].Qtype
	}
	if m.Rcode == dns.RcodeNameError && len(r.Question) == 1 {
		if v := s.view.Load().v; v != nil {
			if z := findZone(v.Zones, r.Question[0]); z != nil {
				rp.Zone = z.Origin()
			}
		}
	}
	return rp
}

// slip makes m the truncated reply a limited client is sent instead: the
// header (TC set, rcode kept) and the question alone, as XDP and NSD send
// it. Without records or OPT it is never larger than the query, so a
// spoofed flood gains no amplification from it.
func slip(m *dns.Msg) {
	m.Answer, m.Ns, m.Extra = nil, nil, nil
	m.Truncated = true
}

// reply builds the reply to r, which came over TCP if tcp, in sc's memory
// when sc is not nil, and names its outcome.
func (s *Server) reply(r *dns.Msg, client netip.Addr, tcp bool, sc *scratch) (*dns.Msg, string) {
	m := sc.msg()
	*m = dns.Msg{
		MsgHdr: dns.MsgHdr{
			Id:               r.Id,
			Response:         true,
			Opcode:           r.Opcode,
			RecursionDesired: r.RecursionDesired,
			CheckingDisabled: r.CheckingDisabled,
		},
		// Compression makes the answer's owner a pointer to the question,
		// as XDP writes it (0xC00C).
		Compress: true,
	}
	qopt, ok := queryOPT(r)
	var opt *dns.OPT
	if ok && qopt != nil {
		opt = replyOPT(qopt)
	}
	done := func(rcode int, outcome string) (*dns.Msg, string) {
		m.Rcode = rcode
		if opt != nil {
			// After ECS, where XDP writes it too.
			if s.nsid != nil && wantsNSID(qopt) {
				opt.Option = append(opt.Option, s.nsid)
			}
			if tcp && wantsKeepalive(qopt) {
				opt.Option = append(opt.Option, s.keepalive)
			}
			m.Extra = append(m.Extra, opt) // last, as Truncate expects
		}
		return m, outcome
	}

	if len(r.Question) == 1 {
		m.Question = r.Question
	}
	switch {
	case r.Opcode != dns.OpcodeQuery:
		// RD and CD are defined for QUERY only (RFC 1035 §4.1.1, RFC
		// 4035 §3.1.6): a reply to another opcode that echoed them would
		// claim a meaning they do not have there.
		m.RecursionDesired, m.CheckingDisabled = false, false
		return done(dns.RcodeNotImplemented, OutcomeNotImp)
	case !ok:
		return done(dns.RcodeFormatError, OutcomeFormErr)
	case qopt != nil && qopt.Version() != 0:
		return done(dns.RcodeBadVers, OutcomeBadVers) // RFC 6891 §6.1.3
	case len(r.Question) != 1:
		return done(dns.RcodeFormatError, OutcomeFormErr)
	}

	q := r.Question[0]
	if rcode, outcome, ok := s.identity(m, q, client); ok {
		return done(rcode, outcome)
	}
	if q.Qclass != dns.ClassINET || q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return done(dns.RcodeRefused, OutcomeRefused) // only IN, and no zone transfers
	}
	v := s.view.Load().v
	if sc != nil && sc.pre.v != nil {
		v = sc.pre.v // the view the fast path drew a selection from
	}
	if v == nil {
		return done(dns.RcodeRefused, OutcomeRefused)
	}
	z := findZone(v.Zones, q)
	if z == nil {
		return done(dns.RcodeRefused, OutcomeRefused)
	}

	res := z.Lookup(q.Name, q.Qtype, qopt != nil && qopt.Do())
	m.Authoritative = res.Authoritative
	m.Answer, m.Ns, m.Extra = res.Answer, res.Ns, res.Extra
	switch res.Kind {
	case zone.Answer:
		return done(dns.RcodeSuccess, OutcomeNoError)
	case zone.NoData:
		return done(dns.RcodeSuccess, OutcomeNoData)
	case zone.NXDomain:
		return done(dns.RcodeNameError, OutcomeNXDomain)
	case zone.Referral:
		return done(dns.RcodeSuccess, OutcomeReferral)
	case zone.YXDomain:
		return done(dns.RcodeYXDomain, OutcomeYXDomain)
	case zone.Dynamic:
		query := Query{Client: client, ECS: subnet(qopt)}
		do := qopt != nil && qopt.Do()
		if res.DynamicType == dns.TypeCNAME {
			return done(s.cname(m, opt, v, q, res, query, do, signer(z, do)))
		}
		return done(s.dynamic(m, opt, v.Records, q, res, query, sc, signer(z, do)))
	}
	// No kind: the name was not in the zone Find returned. Fail rather
	// than guess.
	m.Authoritative = false
	m.Answer, m.Ns, m.Extra = nil, nil, nil
	return done(dns.RcodeServerFailure, OutcomeServFail)
}

// signer returns z when a reply must carry z's online signatures.
func signer(z *zone.Zone, do bool) *zone.Zone {
	if do && z != nil && z.Online() {
		return z
	}
	return nil
}

// dynamic fills m from the selection for a dynamic set and returns the
// rcode and outcome. With sz, the zone signs the answer it selected.
func (s *Server) dynamic(m *dns.Msg, opt *dns.OPT, recs Records, q dns.Question, res zone.Result, query Query, sc *scratch, sz *zone.Zone) (int, string) {
	var sel Selection
	ok := false
	switch {
	case sc != nil && sc.pre.v != nil:
		sel, ok = sc.pre.sel, true
	case recs != nil:
		sel, ok = recs.Select(res.DynamicName, res.DynamicType, query, sc.addrRoom())
	}
	if !ok || sel.Action == ServFail {
		m.Authoritative = false
		m.Answer, m.Ns, m.Extra = nil, nil, nil
		return dns.RcodeServerFailure, OutcomeServFail
	}
	if opt != nil && query.ECS != nil && sel.ECSScope != 0 {
		ecs := *query.ECS
		ecs.SourceScope = sel.ECSScope
		opt.Option = []dns.EDNS0{&ecs}
	}
	if sel.Action == NoData || len(sel.Addrs) == 0 {
		return dns.RcodeSuccess, OutcomeNoData
	}
	m.Ns = nil
	owner := chainEnd(q.Name, m.Answer)
	hdr := dns.RR_Header{Name: owner, Rrtype: res.DynamicType, Class: dns.ClassINET, Ttl: sel.TTL}
	// The records with their addresses take one allocation for the whole
	// set, and the answer section one more, not one per address; none with
	// scratch memory that has room.
	n := len(sel.Addrs)
	answer := append(sc.answer(len(m.Answer)+n), m.Answer...)
	if res.DynamicType == dns.TypeA {
		rrs := sc.aRecords(n)
		for i, a := range sel.Addrs {
			r := &rrs[i]
			r.ip = a.Unmap().As4()
			r.rr = dns.A{Hdr: hdr, A: r.ip[:]}
			answer = append(answer, &r.rr)
		}
	} else {
		rrs := sc.aaaaRecords(n)
		for i, a := range sel.Addrs {
			r := &rrs[i]
			r.ip = a.As16()
			r.rr = dns.AAAA{Hdr: hdr, AAAA: r.ip[:]}
			answer = append(answer, &r.rr)
		}
	}
	if sz != nil {
		// Exactly the answers this reply holds; signed by content, so
		// each set the selection produces is signed once per refresh.
		sigs, err := sz.Sign(answer[len(answer)-n:])
		if err != nil {
			m.Authoritative = false
			m.Answer, m.Ns, m.Extra = nil, nil, nil
			return dns.RcodeServerFailure, OutcomeServFail
		}
		answer = append(answer, sigs...)
	}
	m.Answer = answer
	return dns.RcodeSuccess, OutcomeNoError
}

// cname answers at a health-checked CNAME set, and at every CNAME set the
// chase meets after it: the selected target's CNAME, then what the target
// holds for the qtype when it is a name of the served zones, its own
// selection included, as an authoritative server follows a CNAME into its
// own data (RFC 1034 §4.3.2). A chain ends outside the zones, at a loop
// or after maxChain names, where the resolver follows it itself; the
// rcode is that of the last name (RFC 6604). A CNAME query gets the
// CNAME alone.
//
// With sz, each CNAME is signed by the zone that owns it, sz first.
func (s *Server) cname(m *dns.Msg, opt *dns.OPT, v *View, q dns.Question, res zone.Result, query Query, do bool, sz *zone.Zone) (int, string) {
	fail := func() (int, string) {
		m.Authoritative = false
		m.Answer, m.Ns, m.Extra = nil, nil, nil
		return dns.RcodeServerFailure, OutcomeServFail
	}
	seen := []string{dns.CanonicalName(q.Name)}
	for hop := 0; ; hop++ {
		if res.DynamicType != dns.TypeCNAME {
			return s.dynamic(m, opt, v.Records, q, res, query, nil, sz)
		}
		if v.Records == nil {
			return fail()
		}
		sel, ok := v.Records.Select(res.DynamicName, dns.TypeCNAME, query, nil)
		if !ok || sel.Action == ServFail {
			return fail()
		}
		if opt != nil && query.ECS != nil && sel.ECSScope != 0 {
			ecs := *query.ECS
			ecs.SourceScope = sel.ECSScope
			opt.Option = []dns.EDNS0{&ecs}
		}
		if sel.Action == NoData {
			return dns.RcodeSuccess, OutcomeNoData
		}
		cn := []dns.RR{&dns.CNAME{
			Hdr:    dns.RR_Header{Name: chainEnd(q.Name, m.Answer), Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: sel.TTL},
			Target: sel.Target,
		}}
		if sz != nil {
			sigs, err := sz.Sign(cn)
			if err != nil {
				return fail()
			}
			cn = append(cn, sigs...)
		}
		m.Answer = append(m.Answer[:len(m.Answer):len(m.Answer)], cn...)
		m.Ns, m.Extra = nil, nil
		z := v.Zones.Find(sel.Target)
		if q.Qtype == dns.TypeCNAME || z == nil || hop+1 >= maxChain || slices.Contains(seen, sel.Target) {
			return dns.RcodeSuccess, OutcomeNoError
		}
		seen = append(seen, sel.Target)
		sz = signer(z, do)
		res = z.Lookup(sel.Target, q.Qtype, do)
		m.Answer = append(m.Answer, res.Answer...)
		m.Ns, m.Extra = res.Ns, res.Extra
		switch res.Kind {
		case 0:
			return fail() // a signature failed: never answer unsigned
		case zone.Dynamic:
			continue
		case zone.NoData:
			return dns.RcodeSuccess, OutcomeNoData
		case zone.NXDomain:
			return dns.RcodeNameError, OutcomeNXDomain
		case zone.YXDomain:
			return dns.RcodeYXDomain, OutcomeYXDomain
		case zone.Referral:
			// The resolver follows the chain to the delegation itself.
			m.Ns, m.Extra = nil, nil
		}
		return dns.RcodeSuccess, OutcomeNoError
	}
}

// maxChain bounds the health-checked CNAMEs one reply follows, as the
// zone bounds its own chains.
const maxChain = 8

// aRecord and aaaaRecord hold an answer record and the address it points
// at, so that both come from one allocation.
type aRecord struct {
	rr dns.A
	ip [net.IPv4len]byte
}

type aaaaRecord struct {
	rr dns.AAAA
	ip [net.IPv6len]byte
}

// scratch is the memory one UDP loop builds its replies in, reused from
// query to query; a nil scratch allocates.
type scratch struct {
	pre  preselected // what the fast path drew for the query in hand
	m    dns.Msg
	rrs  []dns.RR
	a    []aRecord
	aaaa []aaaaRecord
	// The addresses of a selection, at most maxAnswers.
	addrs [maxAnswers]netip.Addr
}

// addrRoom is the room a selection's addresses are appended to.
func (sc *scratch) addrRoom() []netip.Addr {
	if sc == nil {
		return nil
	}
	return sc.addrs[:0]
}

func (sc *scratch) msg() *dns.Msg {
	if sc == nil {
		return new(dns.Msg)
	}
	return &sc.m
}

// answer returns an empty answer section with room for n records.
func (sc *scratch) answer(n int) []dns.RR {
	if sc == nil {
		return make([]dns.RR, 0, n)
	}
	if cap(sc.rrs) < n {
		sc.rrs = make([]dns.RR, 0, n)
	}
	return sc.rrs[:0]
}

func (sc *scratch) aRecords(n int) []aRecord {
	if sc == nil {
		return make([]aRecord, n)
	}
	if cap(sc.a) < n {
		sc.a = make([]aRecord, n)
	}
	return sc.a[:n]
}

func (sc *scratch) aaaaRecords(n int) []aaaaRecord {
	if sc == nil {
		return make([]aaaaRecord, n)
	}
	if cap(sc.aaaa) < n {
		sc.aaaa = make([]aaaaRecord, n)
	}
	return sc.aaaa[:n]
}

// chainEnd returns the name a CNAME chain in answer ends at, spelled as
// its last CNAME has it, or qname when there is no chain.
func chainEnd(qname string, answer []dns.RR) string {
	for i := len(answer) - 1; i >= 0; i-- {
		if c, ok := answer[i].(*dns.CNAME); ok {
			return c.Target
		}
	}
	return qname
}

// findZone returns the zone that answers q. DS belongs to the parent side
// of a cut (RFC 4035 §3.1.4.1): a DS query for a zone's apex goes to its
// parent when that is served too.
func findZone(zs *zone.Zones, q dns.Question) *zone.Zone {
	z := zs.Find(q.Name)
	if z == nil || q.Qtype != dns.TypeDS || z.Origin() != dns.CanonicalName(q.Name) || z.Origin() == "." {
		return z
	}
	off, _ := dns.NextLabel(q.Name, 0)
	if p := zs.Find(q.Name[off:]); p != nil {
		return p
	}
	return z
}

// truncate fits m into limit bytes and reports whether it set TC. Missing
// additional data does not set TC (RFC 2181 §9), except glue, which a
// referral needs (RFC 9471).
func truncate(m *dns.Msg, limit int, referral bool) bool {
	an, ns := len(m.Answer), len(m.Ns)
	m.Truncate(limit)
	m.Compress = true // Truncate clears it when the message fits without
	if m.Truncated && !referral && len(m.Answer) == an && len(m.Ns) == ns {
		m.Truncated = false
	}
	return m.Truncated
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
