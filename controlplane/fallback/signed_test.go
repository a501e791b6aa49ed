package fallback

import (
	"crypto"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/dnssec"
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

// onlineZone loads text for origin, marks dyn A and cname CNAME dynamic
// and signs it online with a new CSK.
func onlineZone(t *testing.T, origin, text string, dyn ...string) (*zone.Zone, []dns.RR) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir+"/online.zone", text)
	z, err := zone.Load(origin, dir+"/online.zone")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range dyn {
		typ := dns.TypeA
		if strings.HasPrefix(name, "cname.") {
			typ = dns.TypeCNAME
		}
		if err := z.MarkDynamic(name, typ); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := dnssec.Generate(dir+"/keys", origin, dns.ED25519, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner(origin, keys, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.SignOnline(s); err != nil {
		t.Fatal(err)
	}
	return z, s.DNSKEYs()
}

// verified returns the section's sets as "TYPE" in order, failing the test
// for a set without a signature that verifies.
func verified(t *testing.T, section []dns.RR, keys []dns.RR) []string {
	t.Helper()
	var out []string
	for i := 0; i < len(section); {
		h := section[i].Header()
		if h.Rrtype == dns.TypeRRSIG {
			t.Errorf("a signature with no set before it: %v", section[i])
			i++
			continue
		}
		j := i
		for j < len(section) && section[j].Header().Rrtype == h.Rrtype && strings.EqualFold(section[j].Header().Name, h.Name) {
			j++
		}
		set := section[i:j]
		out = append(out, dns.TypeToString[h.Rrtype])
		if j >= len(section) || section[j].Header().Rrtype != dns.TypeRRSIG {
			t.Errorf("%s %s unsigned", h.Name, dns.TypeToString[h.Rrtype])
			i = j
			continue
		}
		sig := section[j].(*dns.RRSIG)
		if err := sig.Verify(keys[0].(*dns.DNSKEY), set); err != nil || sig.TypeCovered != h.Rrtype {
			t.Errorf("%s %s: signature %v: %v", h.Name, dns.TypeToString[h.Rrtype], sig, err)
		}
		i = j + 1
	}
	return out
}

func TestOnlineSigned(t *testing.T) {
	z, keys := onlineZone(t, "online.test.", `$TTL 3600
@    SOA  ns1 hostmaster 1 7200 900 1209600 300
@    NS   ns1
ns1  A    198.18.0.53
www  A    198.18.1.1
`, "dyn.online.test.", "down.online.test.", "cname.online.test.")
	recs := &fakeRecords{sets: map[string]Selection{
		"dyn.online.test. A":       {Action: Answer, TTL: 30, Addrs: []netip.Addr{netip.MustParseAddr("198.18.2.1"), netip.MustParseAddr("198.18.2.2")}},
		"down.online.test. A":      {Action: NoData, TTL: 30},
		"cname.online.test. CNAME": {Action: Answer, TTL: 30, Target: "dyn.online.test."},
	}}
	ts := start(t, &View{Zones: zone.NewZones(z), Records: recs})
	tests := []struct {
		name       string
		q          *dns.Msg
		answer, ns []string
	}{
		{"zone data", withEDNS(query("WWW.online.test.", dns.TypeA), 1232, true), []string{"A"}, nil},
		{"dnskey", withEDNS(query("online.test.", dns.TypeDNSKEY), 1232, true), []string{"DNSKEY"}, nil},
		{"health-checked set", withEDNS(query("dyn.online.test.", dns.TypeA), 1232, true), []string{"A"}, nil},
		{"health-checked cname", withEDNS(query("cname.online.test.", dns.TypeA), 1232, true), []string{"CNAME", "A"}, nil},
		{"all down nodata", withEDNS(query("down.online.test.", dns.TypeA), 1232, true), nil, []string{"SOA", "NSEC"}},
		{"nodata", withEDNS(query("www.online.test.", dns.TypeTXT), 1232, true), nil, []string{"SOA", "NSEC"}},
		{"nxdomain", withEDNS(query("nothere.online.test.", dns.TypeA), 1232, true), nil, []string{"SOA", "NSEC"}},
	}
	for _, tt := range tests {
		for _, network := range []string{"udp", "tcp"} {
			r := new(dns.Msg)
			if err := r.Unpack(ts.exchange(t, network, pack(t, tt.q))); err != nil {
				t.Fatal(err)
			}
			ts.outcome(t)
			if r.Rcode != dns.RcodeSuccess {
				t.Errorf("%s over %s: rcode %s, want NOERROR", tt.name, network, dns.RcodeToString[r.Rcode])
			}
			if got := verified(t, r.Answer, keys); !slices.Equal(got, tt.answer) {
				t.Errorf("%s over %s: answer %v, want %v signed", tt.name, network, got, tt.answer)
			}
			if got := verified(t, r.Ns, keys); !slices.Equal(got, tt.ns) {
				t.Errorf("%s over %s: authority %v, want %v signed", tt.name, network, got, tt.ns)
			}
		}
	}
	// Without DO the same sets come unsigned, through the fast path too.
	r := new(dns.Msg)
	if err := r.Unpack(ts.exchange(t, "udp", pack(t, withEDNS(query("dyn.online.test.", dns.TypeA), 1232, false)))); err != nil {
		t.Fatal(err)
	}
	ts.outcome(t)
	if len(r.Answer) != 2 {
		t.Errorf("without DO: %v, want the two addresses alone", r.Answer)
	}
}
