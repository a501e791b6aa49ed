package zone

import (
	"slices"

	"github.com/miekg/dns"
)

// Kind says what a lookup found, and with it the reply's rcode and AA bit.
type Kind int

// The kinds of result. The zero Kind is none of them: Lookup returns it for
// a name outside the zone.
const (
	Answer   Kind = iota + 1 // NOERROR with records; also a chain that leaves the zone
	NoData                   // NOERROR, no records of the type; SOA in authority
	NXDomain                 // the (last) name does not exist; SOA in authority
	Referral                 // at or below a zone cut: AA=0, NS in authority, glue
	Dynamic                  // the set is served from elsewhere: DynamicName, DynamicType
	YXDomain                 // a DNAME substitution made too long a name (RFC 6672 §2.2)
)

// Result is what goes into the reply's sections. Its records may be shared
// with the zone and must not be modified.
type Result struct {
	Kind              Kind
	Answer, Ns, Extra []dns.RR
	Authoritative     bool // false for Referral

	// For Dynamic: the lowercase owner and type of the set, TypeCNAME
	// for a dynamic CNAME whatever the qtype. Answer holds any CNAME chain
	// that led there, and Ns the SOA (signed when asked) for the reply
	// should the set turn out empty.
	DynamicName string
	DynamicType uint16
}

// maxChain bounds the CNAME and DNAME redirections one lookup follows.
const maxChain = 8

// anyTTL is the TTL of the HINFO that answers ANY (RFC 8482 §4.2). An hour
// keeps resolvers from asking again soon; the answer never changes.
const anyTTL = 3600

// Lookup answers qname and qtype from the zone. qname must be at or below
// the origin (see Zones.Find). Records owned by qname carry qname's own
// spelling, so that a reply can compress them to the question's name.
// With do set and a signed zone, the result carries the zone's RRSIG and
// NSEC or NSEC3 records.
func (z *Zone) Lookup(qname string, qtype uint16, do bool) Result {
	if !z.holds(lower(qname)) {
		return Result{}
	}
	l := &lookup{z: z, qtype: qtype, do: do && z.Signed(), res: Result{Authoritative: true}}
	seen := []string{lower(qname)}
	name := qname
	for hop := 1; ; hop++ {
		next, more := l.step(name, hop == 1)
		if !more {
			return l.result()
		}
		// Past here the resolver follows the chain itself: it left the
		// zone, loops, or is too long.
		key := lower(next)
		if hop > maxChain || !z.holds(key) || slices.Contains(seen, key) {
			l.res.Kind = Answer
			return l.result()
		}
		seen = append(seen, key)
		name = next
	}
}

type lookup struct {
	z      *Zone
	qtype  uint16
	do     bool
	res    Result
	failed bool // online signing failed: no kind, so the caller fails
}

func (l *lookup) result() Result {
	if l.failed {
		return Result{}
	}
	return l.res
}

// step looks up one name of a chain. It returns the next name when it
// ended at a CNAME or DNAME.
func (l *lookup) step(name string, first bool) (string, bool) {
	z := l.z
	key := lower(name)
	var starts [maxLabels]int // on the stack: dns.Split would allocate per query
	idx := labelStarts(key, starts[:0])
	depth := len(idx) - z.labels // labels below the apex
	ce, ceKey := z.apex, z.origin
	for i := depth; i >= 0; i-- {
		if i < depth {
			anc := key[idx[i]:]
			n := z.nodes[anc]
			if n == nil {
				return l.missing(name, ceKey, anc)
			}
			// DS belongs to the parent side of a cut (RFC 4035 §3.1.4.1).
			if n.sets.get(dns.TypeNS) != nil && (i > 0 || l.qtype != dns.TypeDS) {
				if first {
					l.referral(n)
				} else {
					l.res.Kind = Answer // the resolver follows the chain to the referral
				}
				return "", false
			}
			ce, ceKey = n, anc
		}
		if i > 0 && ce.sets.get(dns.TypeDNAME) != nil {
			return l.dname(name, ce)
		}
	}
	return l.at(name, ce, nil)
}

// wildcard describes a synthesis: the closest encloser and next closer
// name of the query, both lowercase (RFC 4592 §3.3.1, RFC 5155 §1.3).
type wildcard struct{ ce, closer string }

// missing handles a name with no node: closer is its ancestor just below
// the closest encloser ceKey.
func (l *lookup) missing(name, ceKey, closer string) (string, bool) {
	if w := l.z.nodes["*."+ceKey]; w != nil {
		return l.at(name, w, &wildcard{ce: ceKey, closer: closer})
	}
	if l.online() {
		// A black lie: the name exists, with no data (see dnssec.go).
		l.res.Kind = NoData
		l.negative()
		l.res.Ns = append(l.res.Ns, l.blackLie(name, nil, true)...)
		return "", false
	}
	l.res.Kind = NXDomain
	l.negative()
	if l.do {
		l.res.Ns = append(l.res.Ns, l.z.nxProof(ceKey, closer)...)
	}
	return "", false
}

// at answers from node n, which owns name or, with w set, is the wildcard
// that synthesises it.
func (l *lookup) at(name string, n *node, w *wildcard) (string, bool) {
	r, t := &l.res, l.qtype
	switch {
	case t == dns.TypeANY && (len(n.sets) > 0 || len(n.dynamic) > 0):
		r.Kind = Answer
		r.Answer = append(r.Answer, l.any(name, n)...)
		l.wildcardProof(w)
	case n.dynamic[dns.TypeCNAME]:
		// Every type but ANY meets the CNAME, which the caller selects
		// and follows.
		r.Kind = Dynamic
		r.DynamicName, r.DynamicType = lower(name), dns.TypeCNAME
		l.negative()
		l.dynamicDenial(name, n)
	case n.sets.get(dns.TypeCNAME) != nil && t != dns.TypeCNAME && t != dns.TypeRRSIG && t != dns.TypeNSEC:
		r.Answer = append(r.Answer, l.rrset(name, n, dns.TypeCNAME)...)
		l.wildcardProof(w)
		return n.sets.get(dns.TypeCNAME)[0].(*dns.CNAME).Target, true
	case n.sets.get(t) != nil:
		r.Kind = Answer
		r.Answer = appendShared(r.Answer, l.rrset(name, n, t))
		l.additional(n.sets.get(t))
		l.wildcardProof(w)
	case n.dynamic[t]:
		r.Kind = Dynamic
		r.DynamicName, r.DynamicType = lower(name), t
		l.negative()
		l.dynamicDenial(name, n)
	default:
		r.Kind = NoData
		l.negative()
		switch {
		case l.online():
			r.Ns = append(r.Ns, l.blackLie(name, present(n), false)...)
		case !l.do:
		case w != nil:
			r.Ns = append(r.Ns, l.z.nxProof(w.ce, w.closer)...)
		default:
			r.Ns = append(r.Ns, l.z.proof(lower(name))...)
		}
	}
	return "", false
}

// any answers ANY as RFC 8482 §4.2 suggests, with a synthesised HINFO.
// An unsigned HINFO would fail validation in a signed zone, so there DO
// gets one signed RRset of the name instead, the choice of §4.1.
func (l *lookup) any(name string, n *node) []dns.RR {
	if l.do {
		for _, t := range types(n) {
			if t != dns.TypeRRSIG && t != dns.TypeNSEC {
				return l.rrset(name, n, t)
			}
		}
	}
	hinfo := []dns.RR{&dns.HINFO{
		Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: anyTTL},
		Cpu: "RFC8482",
	}}
	if l.online() {
		// A name with dynamic sets alone: signed, it validates too.
		return append(hinfo, l.sign(hinfo)...)
	}
	return hinfo
}

// dname follows the DNAME at n, an ancestor of name (RFC 6672 §3.1).
func (l *lookup) dname(name string, n *node) (string, bool) {
	r := &l.res
	d := n.sets.get(dns.TypeDNAME)[0].(*dns.DNAME)
	r.Answer = append(r.Answer, d)
	switch {
	case l.online():
		r.Answer = append(r.Answer, l.sign(n.sets.get(dns.TypeDNAME))...)
	case l.do:
		r.Answer = append(r.Answer, n.sigs(dns.TypeDNAME)...)
	}
	target := name[:len(name)-len(n.name)] + d.Target
	if d.Target == "." {
		target = name[:len(name)-len(n.name)]
	}
	if _, ok := dns.IsDomainName(target); !ok {
		r.Kind = YXDomain
		return "", false
	}
	// The synthesised CNAME is not signed: validators check the DNAME.
	r.Answer = append(r.Answer, &dns.CNAME{
		Hdr:    dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: d.Hdr.Ttl},
		Target: target,
	})
	return target, true
}

// referral answers from above the cut at n (RFC 1034 §4.3.2 step 3b).
func (l *lookup) referral(n *node) {
	r := &l.res
	r.Kind, r.Authoritative = Referral, false
	r.Ns = append(r.Ns, n.sets.get(dns.TypeNS)...)
	if l.do {
		ds := n.sets.get(dns.TypeDS)
		switch {
		case l.online() && ds != nil:
			r.Ns = append(r.Ns, ds...)
			r.Ns = append(r.Ns, l.sign(ds)...)
		case l.online():
			// No DS: the NSEC at the cut says so (RFC 4035 §3.1.4.1).
			r.Ns = append(r.Ns, l.blackLie(n.name, []uint16{dns.TypeNS}, false)...)
		case ds != nil:
			r.Ns = append(r.Ns, ds...)
			r.Ns = append(r.Ns, n.sigs(dns.TypeDS)...)
		default:
			r.Ns = append(r.Ns, l.z.proof(lower(n.name))...) // an unsigned delegation
		}
	}
	for _, rr := range n.sets.get(dns.TypeNS) {
		r.Extra = append(r.Extra, l.z.addresses(rr.(*dns.NS).Ns, false)...)
	}
}

// additional adds the zone's own addresses of the names MX, SRV and NS
// records point at (RFC 1034 §4.3.2 step 6).
func (l *lookup) additional(rrs []dns.RR) {
	var done []string
	for _, rr := range rrs {
		var target string
		switch rr := rr.(type) {
		case *dns.MX:
			target = rr.Mx
		case *dns.SRV:
			target = rr.Target
		case *dns.NS:
			target = rr.Ns
		default:
			return
		}
		key := lower(target)
		if slices.Contains(done, key) || !l.z.holds(key) || !l.z.authoritative(key) {
			continue
		}
		done = append(done, key)
		if l.online() {
			l.res.Extra = append(l.res.Extra, l.signedAddresses(key)...)
		} else {
			l.res.Extra = append(l.res.Extra, l.z.addresses(key, l.do)...)
		}
	}
}

// addresses returns the A and AAAA records the zone file has for target,
// with their signatures when signed is set. Dynamic sets are not included:
// their answer depends on health and on the client.
func (z *Zone) addresses(target string, signed bool) []dns.RR {
	n := z.nodes[lower(target)]
	if n == nil {
		return nil
	}
	var out []dns.RR
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		out = append(out, n.sets.get(t)...)
		if signed {
			out = append(out, n.sigs(t)...)
		}
	}
	return out
}

// wildcardProof adds, for an answer synthesised from a wildcard, the proof
// that no closer name exists (RFC 4035 §3.1.3.3, RFC 5155 §7.2.6).
func (l *lookup) wildcardProof(w *wildcard) {
	if l.do && w != nil {
		l.res.Ns = append(l.res.Ns, l.z.proof(w.closer)...)
	}
}

// negative puts the SOA into authority, as NODATA and NXDOMAIN carry it.
// An empty authority section takes the zone's slice itself, capped so that
// an append copies it: a dynamic set's lookup ends here on every query,
// and the SOA is usually dropped again.
func (l *lookup) negative() {
	if len(l.res.Ns) == 0 {
		l.res.Ns = l.z.negSOA[:len(l.z.negSOA):len(l.z.negSOA)]
	} else {
		l.res.Ns = append(l.res.Ns, l.z.negSOA...)
	}
	switch {
	case l.online():
		l.res.Ns = append(l.res.Ns, l.sign(l.z.negSOA)...)
	case l.do:
		l.res.Ns = append(l.res.Ns, l.z.negSigs...)
	}
}

// rrset returns n's set of type t, and its signatures when asked, owned
// by name.
func (l *lookup) rrset(name string, n *node, t uint16) []dns.RR {
	set := n.sets.get(t)
	if t == dns.TypeDNSKEY && n == l.z.apex && l.z.online != nil {
		set = l.z.online.DNSKEYs() // the keys in it follow their timing
	}
	out := owned(set, name)
	switch {
	case l.online():
		out = append(out, l.sign(out)...)
	case l.do:
		out = append(out, owned(n.sigs(t), name)...)
	}
	return out
}

// appendShared appends rrs to dst, or returns rrs itself when dst is
// empty: rrs may be the zone's own slice, capped, so that a later append
// copies it rather than writing into the zone.
func appendShared(dst, rrs []dns.RR) []dns.RR {
	if len(dst) == 0 {
		return rrs
	}
	return append(dst, rrs...)
}

// owned returns rrs with name as their owner, copying those spelled
// differently so the zone's records stay as loaded. When every record is
// spelled as name, that is rrs itself, capped, and nothing is allocated:
// the common case of an answer.
func owned(rrs []dns.RR, name string) []dns.RR {
	same := true
	for _, rr := range rrs {
		if rr.Header().Name != name {
			same = false
			break
		}
	}
	if same {
		return rrs[:len(rrs):len(rrs)]
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Name != name {
			rr = dns.Copy(rr)
			rr.Header().Name = name
		}
		out[i] = rr
	}
	return out
}

// maxLabels is the most labels a name of 255 bytes has: 127 of one byte
// and the root.
const maxLabels = 128

// labelStarts appends the offset of each label of the fqdn name to idx,
// as dns.Split returns them; "." has none.
func labelStarts(name string, idx []int) []int {
	if name == "." {
		return idx
	}
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		idx = append(idx, off)
	}
	return idx
}

// holds reports whether the lowercase fqdn key is at or below the origin.
// dns.IsSubDomain says the same but allocates both names' label offsets.
func (z *Zone) holds(key string) bool {
	o := z.origin
	switch {
	case o == ".":
		return true
	case len(key) < len(o) || key[len(key)-len(o):] != o:
		return false
	case len(key) == len(o):
		return true
	case key[len(key)-len(o)-1] != '.':
		return false
	}
	// The origin starts a label: the dot before it is not escaped.
	escapes := 0
	for i := len(key) - len(o) - 2; i >= 0 && key[i] == '\\'; i-- {
		escapes++
	}
	return escapes%2 == 0
}

// types returns the types of n's sets in ascending order.
func types(n *node) []uint16 {
	ts := make([]uint16, 0, len(n.sets))
	for t := range n.sets.all() {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}
