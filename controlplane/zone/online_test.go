package zone

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/dnssec"
)

const onlineText = `$ORIGIN online.test.
$TTL 3600
@       SOA   ns1 hostmaster 1 7200 900 1209600 300
@       NS    ns1
@       MX    10 mail
ns1     A     198.18.0.53
mail    A     198.18.0.25
www     TXT   "hello"
*.wild  TXT   "w"
sub     NS    ns.sub
ns.sub  A     198.18.0.54
a.b     A     198.18.3.1
`

// onlineZone loads onlineText with a dynamic A set at dyn, signed online
// with a new KSK and ZSK.
func onlineZone(t *testing.T) (*Zone, *dnssec.Signer) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "online.test.zone")
	if err := os.WriteFile(path, []byte(onlineText), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := Load("online.test.", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.MarkDynamic("dyn.online.test.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	keys, err := dnssec.Generate(filepath.Join(dir, "keys"), "online.test.", dns.ECDSAP256SHA256, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner("online.test.", keys, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.SignOnline(s); err != nil {
		t.Fatal(err)
	}
	return z, s
}

// validate checks that every RRset of the section is signed, and every
// signature verifies with one of keys; it returns the section's sets as
// "owner type" strings in order.
func validate(t *testing.T, section []dns.RR, keys []dns.RR) []string {
	t.Helper()
	type key struct {
		name string
		t    uint16
	}
	sets := map[key][]dns.RR{}
	var order []key
	var sigs []*dns.RRSIG
	for _, rr := range section {
		if sig, ok := rr.(*dns.RRSIG); ok {
			sigs = append(sigs, sig)
			continue
		}
		k := key{strings.ToLower(rr.Header().Name), rr.Header().Rrtype}
		if sets[k] == nil {
			order = append(order, k)
		}
		sets[k] = append(sets[k], rr)
	}
	var out []string
	for _, k := range order {
		out = append(out, k.name+" "+dns.TypeToString[k.t])
		i := slices.IndexFunc(sigs, func(s *dns.RRSIG) bool {
			return s.TypeCovered == k.t && strings.EqualFold(s.Hdr.Name, k.name)
		})
		if i < 0 {
			t.Errorf("%s %s unsigned", k.name, dns.TypeToString[k.t])
			continue
		}
		sig := sigs[i]
		j := slices.IndexFunc(keys, func(rr dns.RR) bool { return rr.(*dns.DNSKEY).KeyTag() == sig.KeyTag })
		if j < 0 {
			t.Errorf("%s %s signed by unknown key %d", k.name, dns.TypeToString[k.t], sig.KeyTag)
			continue
		}
		if err := sig.Verify(keys[j].(*dns.DNSKEY), sets[k]); err != nil {
			t.Errorf("%s %s: %v", k.name, dns.TypeToString[k.t], err)
		}
		if !sig.ValidityPeriod(time.Now()) {
			t.Errorf("%s %s: signature not valid now", k.name, dns.TypeToString[k.t])
		}
	}
	return out
}

func TestOnlineLookup(t *testing.T) {
	z, s := onlineZone(t)
	keys := s.DNSKEYs()
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		kind    Kind
		answer  []string
		ns      []string
		nsec    string // the NSEC in authority, as text after the owner
		labels  uint8  // of the answer's signature, when set
		keyUsed uint16 // the answer's signer, when set
	}{
		{name: "answer", qname: "www.online.test.", qtype: dns.TypeTXT, kind: Answer, answer: []string{"www.online.test. TXT"}},
		{name: "mx with signed additional", qname: "online.test.", qtype: dns.TypeMX, kind: Answer, answer: []string{"online.test. MX"}},
		{name: "dnskey by the ksk", qname: "online.test.", qtype: dns.TypeDNSKEY, kind: Answer, answer: []string{"online.test. DNSKEY"}, keyUsed: s.Keys()[0].Tag()},
		{name: "wildcard signed at the name", qname: "x.wild.online.test.", qtype: dns.TypeTXT, kind: Answer, answer: []string{"x.wild.online.test. TXT"}, labels: 4},
		{name: "nxdomain is a black lie", qname: "nope.online.test.", qtype: dns.TypeA, kind: NoData,
			ns: []string{"online.test. SOA", "nope.online.test. NSEC"}, nsec: `\000.nope.online.test. RRSIG NSEC NXNAME`},
		{name: "nodata", qname: "www.online.test.", qtype: dns.TypeA, kind: NoData,
			ns: []string{"online.test. SOA", "www.online.test. NSEC"}, nsec: `\000.www.online.test. TXT RRSIG NSEC`},
		{name: "nodata at the apex", qname: "online.test.", qtype: dns.TypeAAAA, kind: NoData,
			ns: []string{"online.test. SOA", "online.test. NSEC"}, nsec: `\000.online.test. NS SOA MX RRSIG NSEC DNSKEY`},
		{name: "empty non-terminal", qname: "b.online.test.", qtype: dns.TypeA, kind: NoData,
			ns: []string{"online.test. SOA", "b.online.test. NSEC"}, nsec: `\000.b.online.test. RRSIG NSEC`},
		{name: "wildcard nodata", qname: "x.wild.online.test.", qtype: dns.TypeA, kind: NoData,
			ns: []string{"online.test. SOA", "x.wild.online.test. NSEC"}, nsec: `\000.x.wild.online.test. TXT RRSIG NSEC`},
		{name: "dynamic set denies its own type", qname: "dyn.online.test.", qtype: dns.TypeA, kind: Dynamic,
			ns: []string{"online.test. SOA", "dyn.online.test. NSEC"}, nsec: `\000.dyn.online.test. RRSIG NSEC`},
		{name: "dynamic name nodata", qname: "dyn.online.test.", qtype: dns.TypeTXT, kind: NoData,
			ns: []string{"online.test. SOA", "dyn.online.test. NSEC"}, nsec: `\000.dyn.online.test. A RRSIG NSEC`},
		{name: "ds at a cut", qname: "sub.online.test.", qtype: dns.TypeDS, kind: NoData,
			ns: []string{"online.test. SOA", "sub.online.test. NSEC"}, nsec: `\000.sub.online.test. NS RRSIG NSEC`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := z.Lookup(tt.qname, tt.qtype, true)
			if r.Kind != tt.kind {
				t.Fatalf("kind %d, want %d", r.Kind, tt.kind)
			}
			if got := validate(t, r.Answer, keys); !slices.Equal(got, tt.answer) {
				t.Errorf("answer %v, want %v", got, tt.answer)
			}
			if got := validate(t, r.Ns, keys); !slices.Equal(got, tt.ns) {
				t.Errorf("authority %v, want %v", got, tt.ns)
			}
			validate(t, r.Extra, keys)
			for _, rr := range r.Ns {
				if nsec, ok := rr.(*dns.NSEC); ok {
					got := strings.TrimPrefix(nsec.String(), nsec.Hdr.String())
					if got != tt.nsec {
						t.Errorf("NSEC %q, want %q", got, tt.nsec)
					}
					if nsec.Hdr.Ttl != 300 {
						t.Errorf("NSEC TTL %d, want the SOA minimum 300", nsec.Hdr.Ttl)
					}
				}
			}
			for _, rr := range r.Answer {
				if sig, ok := rr.(*dns.RRSIG); ok {
					if tt.labels != 0 && sig.Labels != tt.labels {
						t.Errorf("signature labels %d, want %d", sig.Labels, tt.labels)
					}
					if tt.keyUsed != 0 && sig.KeyTag != tt.keyUsed {
						t.Errorf("signed by %d, want %d", sig.KeyTag, tt.keyUsed)
					}
				}
			}
		})
	}
}

func TestOnlineMXAdditionalSigned(t *testing.T) {
	z, s := onlineZone(t)
	r := z.Lookup("online.test.", dns.TypeMX, true)
	if got := validate(t, r.Extra, s.DNSKEYs()); !slices.Equal(got, []string{"mail.online.test. A"}) {
		t.Fatalf("additional %v, want mail's A signed", got)
	}
}

func TestOnlineReferral(t *testing.T) {
	z, s := onlineZone(t)
	r := z.Lookup("www.sub.online.test.", dns.TypeA, true)
	if r.Kind != Referral {
		t.Fatalf("kind %d, want a referral", r.Kind)
	}
	var nsec *dns.NSEC
	for _, rr := range r.Ns {
		if n, ok := rr.(*dns.NSEC); ok {
			nsec = n
		}
	}
	if nsec == nil || nsec.Hdr.Name != "sub.online.test." || !slices.Equal(nsec.TypeBitMap, []uint16{dns.TypeNS, dns.TypeRRSIG, dns.TypeNSEC}) {
		t.Fatalf("referral NSEC %v, want one at the cut with NS RRSIG NSEC", nsec)
	}
	for _, rr := range r.Ns {
		if sig, ok := rr.(*dns.RRSIG); ok && sig.TypeCovered == dns.TypeNS {
			t.Errorf("the delegation's NS is signed: %v", sig)
		}
	}
	proof := slices.DeleteFunc(slices.Clone(r.Ns), func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeNS })
	if got := validate(t, proof, s.DNSKEYs()); !slices.Equal(got, []string{"sub.online.test. NSEC"}) {
		t.Errorf("proof %v, want the NSEC at the cut", got)
	}
}

func TestOnlineWithoutDO(t *testing.T) {
	z, _ := onlineZone(t)
	r := z.Lookup("nope.online.test.", dns.TypeA, false)
	if r.Kind != NXDomain || len(r.Ns) != 1 {
		t.Fatalf("without DO: kind %d, authority %v; want NXDOMAIN with the SOA alone", r.Kind, r.Ns)
	}
	if !z.Signed() || !z.Online() {
		t.Fatal("an online zone does not say it is signed")
	}
}

func TestSignOnlineRefusesSignedFile(t *testing.T) {
	z := signedZone(t, false)
	_, s := onlineZone(t)
	if err := z.SignOnline(s); err == nil || !strings.Contains(err.Error(), "signed already") {
		t.Fatalf("SignOnline of a signed zone file: %v", err)
	}
}
