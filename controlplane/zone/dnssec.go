package zone

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// A zone is signed offline or online.
//
// Offline, Lookup serves the RRSIG, NSEC and NSEC3 records of the zone file
// and never signs. Denial is best effort: for each name to deny it returns
// the NSEC or NSEC3 record that matches the name or covers it, found by
// canonical or hash order, with its signatures. The callers pick the names
// as RFC 4035 §3.1.3 and RFC 5155 §7.2 list them.
//
// Online (SignOnline), every set a DO lookup returns is signed as it is
// returned, wildcard answers as if the query's name owned them, and denial
// is compact: NOERROR with one NSEC owned by the query's name, whose next
// name \000.name covers no other name, whose bitmap lists the types the
// name has and, for a name that does not exist, NXNAME ("black lies",
// draft-ietf-dnsop-compact-denial-of-existence). Nothing is precomputed
// per name and the zone cannot be walked.

// Signer signs a zone's sets online: controlplane/dnssec.Signer.
type Signer interface {
	DNSKEYs() []dns.RR
	Sign(rrset []dns.RR) ([]dns.RR, error)
	Renews(sigs []dns.RR) (refresh, rekey time.Time)
}

// SignOnline makes z signed by s: its apex gets s's DNSKEY set, and DO
// lookups are signed as they are made. A zone file that holds DNSSEC
// records of its own is signed offline already and is refused.
func (z *Zone) SignOnline(s Signer) error {
	for _, n := range z.nodes {
		for _, t := range []uint16{dns.TypeDNSKEY, dns.TypeRRSIG, dns.TypeNSEC} {
			if n.sets.get(t) != nil {
				return fmt.Errorf("signing %s online: the zone file has %s records: it is signed already", z.origin, dns.TypeToString[t])
			}
		}
	}
	if len(z.hashed) > 0 {
		return fmt.Errorf("signing %s online: the zone file has NSEC3 records: it is signed already", z.origin)
	}
	for _, k := range s.DNSKEYs() {
		k = dns.Copy(k)
		k.Header().Name = z.apex.name
		z.apex.sets.add(dns.TypeDNSKEY, k)
	}
	z.online = s
	return nil
}

// Online reports whether z is signed online.
func (z *Zone) Online() bool { return z.online != nil }

// Sign returns the signatures of rrset, a set of z that z does not hold
// itself (a health-checked answer), when z is signed online; nil when not.
func (z *Zone) Sign(rrset []dns.RR) ([]dns.RR, error) {
	if z.online == nil || len(rrset) == 0 {
		return nil, nil
	}
	return z.online.Sign(rrset)
}

// Renews says when Sign returns other signatures than sigs
// (dnssec.Signer.Renews); zero times when z is not signed online.
func (z *Zone) Renews(sigs []dns.RR) (refresh, rekey time.Time) {
	if z.online == nil {
		return time.Time{}, time.Time{}
	}
	return z.online.Renews(sigs)
}

// NoData returns the authority section of the signed NODATA of name's
// dynamic set of type qtype, for when its selection answers nothing, as a
// DO lookup returns it: the SOA, the NSEC at name and their RRSIGs. nil
// when z is not signed online, the set is not dynamic, or a signature
// cannot be made.
func (z *Zone) NoData(name string, qtype uint16) []dns.RR {
	if z.online == nil {
		return nil
	}
	r := z.Lookup(name, qtype, true)
	if r.Kind != Dynamic || r.DynamicType != qtype || len(r.Answer) > 0 {
		return nil
	}
	return r.Ns
}

// online reports whether this lookup signs as it goes.
func (l *lookup) online() bool { return l.do && l.z.online != nil }

// sign returns the signatures of rrs. A failure leaves the lookup without
// a kind, so that it is answered SERVFAIL, never unsigned.
func (l *lookup) sign(rrs []dns.RR) []dns.RR {
	sigs, err := l.z.online.Sign(rrs)
	if err != nil {
		l.failed = true
	}
	return sigs
}

// blackLie returns the signed NSEC that denies name any type but types,
// and with nxname that it exists.
func (l *lookup) blackLie(name string, types []uint16, nxname bool) []dns.RR {
	bitmap := append(slices.Clone(types), dns.TypeRRSIG, dns.TypeNSEC)
	if nxname {
		bitmap = append(bitmap, dns.TypeNXNAME)
	}
	slices.Sort(bitmap)
	nsec := []dns.RR{&dns.NSEC{
		Hdr:        dns.RR_Header{Name: name, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: l.z.negSOA[0].Header().Ttl},
		NextDomain: `\000.` + lower(name),
		TypeBitMap: slices.Compact(bitmap),
	}}
	return append(nsec, l.sign(nsec)...)
}

// dynamicDenial adds, signed online, the NSEC a dynamic set's NODATA
// needs should its selection answer nothing: n's types but the one asked
// and CNAME, either of which would claim the data is there.
func (l *lookup) dynamicDenial(name string, n *node) {
	if !l.online() {
		return
	}
	types := slices.DeleteFunc(present(n), func(t uint16) bool { return t == l.qtype || t == dns.TypeCNAME })
	l.res.Ns = append(l.res.Ns, l.blackLie(name, types, false)...)
}

// present returns the types n has, dynamic sets included, sorted.
func present(n *node) []uint16 {
	ts := types(n)
	for t := range n.dynamic {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// signedAddresses is addresses for an additional section signed online.
func (l *lookup) signedAddresses(target string) []dns.RR {
	n := l.z.nodes[lower(target)]
	if n == nil {
		return nil
	}
	var out []dns.RR
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		if set := n.sets.get(t); set != nil {
			out = append(out, set...)
			out = append(out, l.sign(set)...)
		}
	}
	return out
}

// proof returns the denial records for names, without duplicates.
func (z *Zone) proof(names ...string) []dns.RR {
	var out []dns.RR
	for _, name := range names {
		var n *node
		var t uint16
		switch {
		case len(z.nsec) > 0:
			n, t = z.nsecFor(name), dns.TypeNSEC
		case len(z.nsec3) > 0:
			n, t = z.nsec3For(name), dns.TypeNSEC3
		default:
			return nil
		}
		rr := n.sets.get(t)[0]
		if slices.Contains(out, rr) {
			continue
		}
		out = append(out, rr)
		out = append(out, n.sigs(t)...)
	}
	return out
}

// nxProof denies a name whose closest encloser is ce and whose next closer
// name (ce plus one label) is closer: no closer name exists and no
// wildcard at ce (RFC 4035 §3.1.3.2, RFC 5155 §7.2.2). The same records
// prove NODATA for a name a wildcard synthesises (RFC 4035 §3.1.3.4,
// RFC 5155 §7.2.5).
func (z *Zone) nxProof(ce, closer string) []dns.RR {
	names := []string{closer, "*." + ce}
	if len(z.nsec3) > 0 {
		names = append(names, ce)
	}
	return z.proof(names...)
}

// nsecFor returns the NSEC node that owns name or, when none does, the one
// before it in canonical order, whose NSEC covers name.
func (z *Zone) nsecFor(name string) *node {
	i := sort.Search(len(z.nsec), func(i int) bool { return canonicalCompare(z.nsec[i].name, name) > 0 })
	if i == 0 {
		i = len(z.nsec) // before the first owner: the last NSEC wraps round to cover it
	}
	return z.nsec[i-1]
}

// nsec3For is nsecFor for the NSEC3 chain, in the order of the hashes.
func (z *Zone) nsec3For(name string) *node {
	p := z.nsec3[0].sets.get(dns.TypeNSEC3)[0].(*dns.NSEC3)
	h := dns.HashName(name, p.Hash, p.Iterations, p.Salt)
	i := sort.Search(len(z.nsec3), func(i int) bool { return hashLabel(z.nsec3[i]) > h })
	if i == 0 {
		i = len(z.nsec3)
	}
	return z.nsec3[i-1]
}

// hashLabel returns the first label of an NSEC3 owner in upper case, as
// dns.HashName spells hashes; base32hex keeps the order of the hashes.
func hashLabel(n *node) string {
	first, _, _ := strings.Cut(n.name, ".")
	return strings.ToUpper(first)
}

// canonicalCompare orders names as RFC 4034 §6.1 does: by their lowercase
// wire-format labels, compared from the root down.
func canonicalCompare(a, b string) int {
	la, lb := wireLabels(a), wireLabels(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := bytes.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return len(la) - len(lb)
}

func wireLabels(name string) [][]byte {
	buf := make([]byte, 256)
	off, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil {
		return nil // not a valid name; zone names and queries always are
	}
	// Length bytes are at most 63, below 'A', so the whole buffer can be
	// lowercased, escaped letters included.
	for i, c := range buf[:off] {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	var labels [][]byte
	for i := 0; i < off && buf[i] != 0; i += int(buf[i]) + 1 {
		labels = append(labels, buf[i+1:i+1+int(buf[i])])
	}
	return labels
}
