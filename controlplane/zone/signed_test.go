package zone

import (
	"crypto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const signedText = `$ORIGIN signed.test.
$TTL 3600
@       SOA   ns1 hostmaster 1 7200 900 1209600 300
@       NS    ns1
ns1     A     198.18.0.53
www     A     198.18.1.1
www     AAAA  fd53::1
*.wild  TXT   "w"
a.b     A     198.18.3.1
`

// signedZone signs signedText with a new key and a denial chain, NSEC or
// NSEC3 (SHA-1, no salt, no iterations), and loads it.
func signedZone(t *testing.T, nsec3 bool) *Zone {
	t.Helper()
	const origin = "signed.test."
	var all []dns.RR
	zp := dns.NewZoneParser(strings.NewReader(signedText), origin, "")
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		all = append(all, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	key := &dns.DNSKEY{
		Hdr:   dns.RR_Header{Name: origin, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256,
	}
	priv, err := key.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, key)
	all = append(all, denialChain(origin, all, nsec3)...)

	var sets [][]dns.RR
	for _, rr := range all {
		i := slices.IndexFunc(sets, func(s []dns.RR) bool {
			return s[0].Header().Name == rr.Header().Name && s[0].Header().Rrtype == rr.Header().Rrtype
		})
		if i < 0 {
			sets = append(sets, []dns.RR{rr})
		} else {
			sets[i] = append(sets[i], rr)
		}
	}
	var text strings.Builder
	now := uint32(time.Now().Unix())
	for _, set := range sets {
		sig := &dns.RRSIG{
			Hdr:    dns.RR_Header{Ttl: set[0].Header().Ttl},
			KeyTag: key.KeyTag(), SignerName: origin, Algorithm: key.Algorithm,
			Inception: now - 3600, Expiration: now + 86400,
		}
		if err := sig.Sign(priv.(crypto.Signer), set); err != nil {
			t.Fatal(err)
		}
		for _, rr := range append(set, sig) {
			text.WriteString(rr.String() + "\n")
		}
	}
	path := filepath.Join(t.TempDir(), "signed.zone")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := Load(origin, path)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// denialChain returns the NSEC or NSEC3 chain over the owners of rrs.
func denialChain(origin string, rrs []dns.RR, nsec3 bool) []dns.RR {
	typesAt := make(map[string][]uint16)
	for _, rr := range rrs {
		name := rr.Header().Name
		typesAt[name] = append(typesAt[name], rr.Header().Rrtype)
		if nsec3 { // empty non-terminals get NSEC3 records too
			for off, end := dns.NextLabel(name, 0); !end && dns.IsSubDomain(origin, name[off:]); off, end = dns.NextLabel(name, off) {
				if _, ok := typesAt[name[off:]]; !ok {
					typesAt[name[off:]] = nil
				}
			}
		}
	}
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 300}
	}
	var owners []string
	for name := range typesAt {
		owners = append(owners, name)
	}
	var out []dns.RR
	if !nsec3 {
		slices.SortFunc(owners, canonicalCompare)
		for i, name := range owners {
			bitmap := append(typesAt[name], dns.TypeRRSIG, dns.TypeNSEC)
			slices.Sort(bitmap)
			out = append(out, &dns.NSEC{Hdr: hdr(name, dns.TypeNSEC), NextDomain: owners[(i+1)%len(owners)], TypeBitMap: slices.Compact(bitmap)})
		}
		return out
	}
	hashes := make(map[string]string)
	for _, name := range owners {
		hashes[dns.HashName(name, dns.SHA1, 0, "")] = name
	}
	sorted := make([]string, 0, len(hashes))
	for h := range hashes {
		sorted = append(sorted, h)
	}
	slices.Sort(sorted)
	for i, h := range sorted {
		var bitmap []uint16
		if ts := typesAt[hashes[h]]; len(ts) > 0 {
			bitmap = append(ts, dns.TypeRRSIG)
			slices.Sort(bitmap)
			bitmap = slices.Compact(bitmap)
		}
		out = append(out, &dns.NSEC3{
			Hdr: hdr(strings.ToLower(h)+"."+origin, dns.TypeNSEC3), Hash: dns.SHA1, HashLength: 20,
			NextDomain: sorted[(i+1)%len(sorted)], TypeBitMap: bitmap,
		})
	}
	return out
}

// typeList lists the types of rrs, RRSIGs as "RRSIG/covered".
func typeList(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = dns.TypeToString[rr.Header().Rrtype]
		if sig, ok := rr.(*dns.RRSIG); ok {
			out[i] += "/" + dns.TypeToString[sig.TypeCovered]
		}
	}
	return out
}

func TestSignedLookup(t *testing.T) {
	z := signedZone(t, false)
	if !z.Signed() {
		t.Fatal("zone with DNSKEY not signed")
	}
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		do     bool
		kind   Kind
		answer []string
		ns     []string
	}{
		{"answer", "WWW.signed.test.", dns.TypeA, true, Answer, []string{"A", "RRSIG/A"}, nil},
		{"no do, no signatures", "www.signed.test.", dns.TypeA, false, Answer, []string{"A"}, nil},
		{"rrsig asked for", "www.signed.test.", dns.TypeRRSIG, false, Answer, []string{"RRSIG/A", "RRSIG/AAAA", "RRSIG/NSEC"}, nil},
		{"nodata", "www.signed.test.", dns.TypeMX, true, NoData, nil, []string{"SOA", "RRSIG/SOA", "NSEC", "RRSIG/NSEC"}},
		{"nodata without do", "www.signed.test.", dns.TypeMX, false, NoData, nil, []string{"SOA"}},
		{"nxdomain", "nothere.signed.test.", dns.TypeA, true, NXDomain, nil, []string{"SOA", "RRSIG/SOA", "NSEC", "RRSIG/NSEC", "NSEC", "RRSIG/NSEC"}},
		{"wildcard", "x.wild.signed.test.", dns.TypeTXT, true, Answer, []string{"TXT", "RRSIG/TXT"}, []string{"NSEC", "RRSIG/NSEC"}},
		{"any with do", "www.signed.test.", dns.TypeANY, true, Answer, []string{"A", "RRSIG/A"}, nil},
		{"any without do", "www.signed.test.", dns.TypeANY, false, Answer, []string{"HINFO"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := z.Lookup(tt.qname, tt.qtype, tt.do)
			if r.Kind != tt.kind {
				t.Errorf("kind %d, want %d", r.Kind, tt.kind)
			}
			if got := typeList(r.Answer); !slices.Equal(got, tt.answer) {
				t.Errorf("answer %q, want %q", got, tt.answer)
			}
			if got := typeList(r.Ns); !slices.Equal(got, tt.ns) {
				t.Errorf("authority %q, want %q", got, tt.ns)
			}
			for _, rr := range r.Answer {
				if rr.Header().Name != tt.qname {
					t.Errorf("%v: owner is not the qname", rr)
				}
			}
		})
	}
}

func TestSignedDenial(t *testing.T) {
	for _, nsec3 := range []bool{false, true} {
		z := signedZone(t, nsec3)
		tests := []struct {
			name           string
			qname          string
			qtype          uint16
			match, covered []string // names some record of the proof must match or cover
		}{
			{"nxdomain", "x.nothere.signed.test.", dns.TypeA,
				[]string{"signed.test."}, []string{"nothere.signed.test.", "*.signed.test."}},
			{"nodata", "www.signed.test.", dns.TypeMX, []string{"www.signed.test."}, nil},
			{"empty non-terminal", "b.signed.test.", dns.TypeA, nil, []string{"b.signed.test."}},
			{"wildcard nodata", "x.wild.signed.test.", dns.TypeMX,
				[]string{"*.wild.signed.test."}, []string{"x.wild.signed.test."}},
			{"wildcard answer", "x.wild.signed.test.", dns.TypeTXT, nil, []string{"x.wild.signed.test."}},
		}
		for _, tt := range tests {
			r := z.Lookup(tt.qname, tt.qtype, true)
			for _, name := range tt.match {
				if !slices.ContainsFunc(r.Ns, func(rr dns.RR) bool { return proves(rr, name, true) }) {
					t.Errorf("nsec3=%v %s: no record matches %s in %v", nsec3, tt.name, name, r.Ns)
				}
			}
			for _, name := range tt.covered {
				if !slices.ContainsFunc(r.Ns, func(rr dns.RR) bool { return proves(rr, name, false) }) {
					t.Errorf("nsec3=%v %s: no record covers %s in %v", nsec3, tt.name, name, r.Ns)
				}
			}
		}
	}
}

// proves reports whether rr, an NSEC or NSEC3, matches name (match) or
// covers it. An NSEC3 of the empty non-terminal b.signed.test. matches it,
// which proves NODATA as well as a cover would; NSEC leaves it a cover.
func proves(rr dns.RR, name string, match bool) bool {
	switch rr := rr.(type) {
	case *dns.NSEC3:
		return rr.Match(name) || !match && rr.Cover(name)
	case *dns.NSEC:
		if match {
			return strings.EqualFold(rr.Hdr.Name, name)
		}
		after := canonicalCompare(rr.Hdr.Name, name) < 0
		before := canonicalCompare(name, rr.NextDomain) < 0
		wraps := canonicalCompare(rr.NextDomain, rr.Hdr.Name) <= 0
		return after && (before || wraps)
	}
	return false
}
