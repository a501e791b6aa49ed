package fallback

import (
	"crypto"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steadydns/steadydns/controlplane/zone"
)

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// signedZone signs text for origin with a new key, every RRset, and loads
// it. It builds no NSEC chain: the zone package tests denial.
func signedZone(t testing.TB, origin, text string) *zone.Zone {
	t.Helper()
	key := &dns.DNSKEY{
		Hdr:   dns.RR_Header{Name: origin, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256,
	}
	priv, err := key.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string][]dns.RR{}
	var order []string
	zp := dns.NewZoneParser(strings.NewReader(text+key.String()+"\n"), origin, "")
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		k := rr.Header().Name + " " + dns.TypeToString[rr.Header().Rrtype]
		if sets[k] == nil {
			order = append(order, k)
		}
		sets[k] = append(sets[k], rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	now := uint32(time.Now().Unix())
	for _, k := range order {
		sig := &dns.RRSIG{
			Hdr:    dns.RR_Header{Ttl: sets[k][0].Header().Ttl},
			KeyTag: key.KeyTag(), SignerName: origin, Algorithm: key.Algorithm,
			Inception: now - 3600, Expiration: now + 86400,
		}
		if err := sig.Sign(priv.(crypto.Signer), sets[k]); err != nil {
			t.Fatal(err)
		}
		for _, rr := range append(sets[k], sig) {
			out.WriteString(rr.String() + "\n")
		}
	}
	path := t.TempDir() + "/signed.zone"
	writeFile(t, path, out.String())
	z, err := zone.Load(origin, path)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func TestSignedZone(t *testing.T) {
	z := signedZone(t, "signed.test.", `$TTL 3600
@    SOA  ns1 hostmaster 1 7200 900 1209600 300
@    NS   ns1
ns1  A    198.18.0.53
www  A    198.18.1.1
`)
	ts := start(t, &View{Zones: zone.NewZones(z)})
	tests := []struct {
		name       string
		q          *dns.Msg
		answer, ns []string
		rcode      int
	}{
		{"do", withEDNS(query("WWW.signed.test.", dns.TypeA), 1232, true), []string{"A", "RRSIG"}, nil, dns.RcodeSuccess},
		{"no do", withEDNS(query("www.signed.test.", dns.TypeA), 1232, false), []string{"A"}, nil, dns.RcodeSuccess},
		{"no edns", query("www.signed.test.", dns.TypeA), []string{"A"}, nil, dns.RcodeSuccess},
		{"nodata with do", withEDNS(query("www.signed.test.", dns.TypeMX), 1232, true), nil, []string{"SOA", "RRSIG"}, dns.RcodeSuccess},
		{"nxdomain with do", withEDNS(query("nothere.signed.test.", dns.TypeA), 1232, true), nil, []string{"SOA", "RRSIG"}, dns.RcodeNameError},
	}
	for _, tt := range tests {
		for _, network := range []string{"udp", "tcp"} {
			r := new(dns.Msg)
			if err := r.Unpack(ts.exchange(t, network, pack(t, tt.q))); err != nil {
				t.Fatal(err)
			}
			ts.outcome(t)
			types := func(rrs []dns.RR) []string {
				var out []string
				for _, rr := range rrs {
					out = append(out, dns.TypeToString[rr.Header().Rrtype])
				}
				return out
			}
			if got := types(r.Answer); r.Rcode != tt.rcode || !slices.Equal(got, tt.answer) || !slices.Equal(types(r.Ns), tt.ns) {
				t.Errorf("%s over %s: %v", tt.name, network, r)
			}
			for _, rr := range r.Answer {
				if rr.Header().Name != tt.q.Question[0].Name {
					t.Errorf("%s over %s: owner %s, want the question's %s", tt.name, network, rr.Header().Name, tt.q.Question[0].Name)
				}
			}
		}
	}
}
