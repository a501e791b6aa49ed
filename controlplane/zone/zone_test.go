package zone

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func loadExample(t *testing.T) *Zone {
	t.Helper()
	z, err := Load("example.test.", "testdata/example.test.zone")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name  string
		qtype uint16
	}{{"web.example.test.", dns.TypeA}, {"dynonly.example.test.", dns.TypeAAAA}, {"dyncname.example.test.", dns.TypeCNAME}} {
		if err := z.MarkDynamic(d.name, d.qtype); err != nil {
			t.Fatal(err)
		}
	}
	return z
}

// rrs renders records one a line, with single spaces, for comparison.
func rrs(list []dns.RR) []string {
	out := make([]string, len(list))
	for i, rr := range list {
		out[i] = strings.Join(strings.Fields(rr.String()), " ")
	}
	return out
}

const (
	soaNeg = "example.test. 300 IN SOA ns1.example.test. hostmaster.example.test. 1 7200 900 1209600 300"
	long   = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee.ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff.gggggggggggggggggggggggggggggggggggggggggggggggggg.long.example.test."
)

func TestLookup(t *testing.T) {
	z := loadExample(t)
	tests := []struct {
		name              string
		qname             string
		qtype             uint16
		kind              Kind
		aa                bool
		answer, ns, extra []string
	}{
		{"soa", "example.test.", dns.TypeSOA, Answer, true,
			[]string{"example.test. 3600 IN SOA ns1.example.test. hostmaster.example.test. 1 7200 900 1209600 300"}, nil, nil},
		{"apex ns with in-zone address", "example.test.", dns.TypeNS, Answer, true,
			[]string{"example.test. 3600 IN NS ns1.example.test.", "example.test. 3600 IN NS ns.elsewhere.test."},
			nil, []string{"ns1.example.test. 3600 IN A 198.18.0.53"}},
		{"mx with additional once per target", "example.test.", dns.TypeMX, Answer, true,
			[]string{"example.test. 3600 IN MX 10 mail.example.test.", "example.test. 3600 IN MX 20 mail.example.test.", "example.test. 3600 IN MX 30 mx.elsewhere.test."},
			nil, []string{"mail.example.test. 3600 IN A 198.18.0.25", "mail.example.test. 3600 IN AAAA fd53::25"}},
		{"txt", "example.test.", dns.TypeTXT, Answer, true, []string{`example.test. 3600 IN TXT "v=spf1 -all"`}, nil, nil},
		{"srv with additional", "_sip._udp.example.test.", dns.TypeSRV, Answer, true,
			[]string{"_sip._udp.example.test. 3600 IN SRV 10 5 5060 sip.example.test."},
			nil, []string{"sip.example.test. 3600 IN A 198.18.0.60"}},
		{"owner spelled as asked, zone order", "STATIC.Example.TEST.", dns.TypeA, Answer, true,
			[]string{"STATIC.Example.TEST. 3600 IN A 198.18.1.10", "STATIC.Example.TEST. 3600 IN A 198.18.1.11"}, nil, nil},
		{"aaaa", "static.example.test.", dns.TypeAAAA, Answer, true, []string{"static.example.test. 60 IN AAAA fd53::10"}, nil, nil},
		{"cname chain", "chain.example.test.", dns.TypeA, Answer, true,
			[]string{"chain.example.test. 3600 IN CNAME Alias.example.test.", "Alias.example.test. 3600 IN CNAME static.example.test.",
				"static.example.test. 3600 IN A 198.18.1.10", "static.example.test. 3600 IN A 198.18.1.11"}, nil, nil},
		{"cname asked for", "alias.example.test.", dns.TypeCNAME, Answer, true,
			[]string{"alias.example.test. 3600 IN CNAME static.example.test."}, nil, nil},
		{"cname to nxdomain", "gone.example.test.", dns.TypeA, NXDomain, true,
			[]string{"gone.example.test. 3600 IN CNAME nothere.example.test."}, []string{soaNeg}, nil},
		{"cname out of zone", "out.example.test.", dns.TypeA, Answer, true,
			[]string{"out.example.test. 3600 IN CNAME www.elsewhere.test."}, nil, nil},
		{"cname loop", "loop1.example.test.", dns.TypeA, Answer, true,
			[]string{"loop1.example.test. 3600 IN CNAME loop2.example.test.", "loop2.example.test. 3600 IN CNAME loop1.example.test."}, nil, nil},
		{"cname to dynamic", "to-web.example.test.", dns.TypeA, Dynamic, true,
			[]string{"to-web.example.test. 3600 IN CNAME web.example.test."}, []string{soaNeg}, nil},
		{"dynamic", "Web.example.test.", dns.TypeA, Dynamic, true, nil, []string{soaNeg}, nil},
		{"other type at dynamic name", "web.example.test.", dns.TypeAAAA, NoData, true, nil, []string{soaNeg}, nil},
		{"dynamic cname", "DynCname.example.test.", dns.TypeA, Dynamic, true, nil, []string{soaNeg}, nil},
		{"dynamic cname for any type", "dyncname.example.test.", dns.TypeMX, Dynamic, true, nil, []string{soaNeg}, nil},
		{"dynamic cname asked for", "dyncname.example.test.", dns.TypeCNAME, Dynamic, true, nil, []string{soaNeg}, nil},
		{"any at dynamic cname", "dyncname.example.test.", dns.TypeANY, Answer, true, []string{`dyncname.example.test. 3600 IN HINFO "RFC8482" ""`}, nil, nil},
		{"dynamic-only name exists", "dynonly.example.test.", dns.TypeMX, NoData, true, nil, []string{soaNeg}, nil},
		{"nxdomain", "nothere.example.test.", dns.TypeA, NXDomain, true, nil, []string{soaNeg}, nil},
		{"nodata", "static.example.test.", dns.TypeMX, NoData, true, nil, []string{soaNeg}, nil},
		{"wildcard", "Foo.wild.example.test.", dns.TypeA, Answer, true, []string{"Foo.wild.example.test. 3600 IN A 198.18.2.1"}, nil, nil},
		{"wildcard, two labels", "x.y.wild.example.test.", dns.TypeTXT, Answer, true, []string{`x.y.wild.example.test. 3600 IN TXT "wild"`}, nil, nil},
		{"wildcard nodata", "foo.wild.example.test.", dns.TypeMX, NoData, true, nil, []string{soaNeg}, nil},
		{"wildcard parent is a non-terminal", "wild.example.test.", dns.TypeA, NoData, true, nil, []string{soaNeg}, nil},
		{"wildcard cname", "foo.wc.example.test.", dns.TypeA, Answer, true,
			[]string{"foo.wc.example.test. 3600 IN CNAME static.example.test.", "static.example.test. 3600 IN A 198.18.1.10", "static.example.test. 3600 IN A 198.18.1.11"}, nil, nil},
		{"empty non-terminal", "b.ent.example.test.", dns.TypeA, NoData, true, nil, []string{soaNeg}, nil},
		{"below empty non-terminal", "c.ent.example.test.", dns.TypeA, NXDomain, true, nil, []string{soaNeg}, nil},
		{"referral with glue", "www.sub.example.test.", dns.TypeA, Referral, false, nil,
			[]string{"sub.example.test. 3600 IN NS ns.sub.example.test.", "sub.example.test. 3600 IN NS ns.elsewhere.test."},
			[]string{"ns.sub.example.test. 3600 IN A 198.18.4.1", "ns.sub.example.test. 3600 IN AAAA fd53::4:1"}},
		{"glue is not an answer", "ns.sub.example.test.", dns.TypeA, Referral, false, nil,
			[]string{"sub.example.test. 3600 IN NS ns.sub.example.test.", "sub.example.test. 3600 IN NS ns.elsewhere.test."},
			[]string{"ns.sub.example.test. 3600 IN A 198.18.4.1", "ns.sub.example.test. 3600 IN AAAA fd53::4:1"}},
		{"ds at the cut from the parent", "sub.example.test.", dns.TypeDS, Answer, true,
			[]string{"sub.example.test. 3600 IN DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"}, nil, nil},
		{"dname", "host.DN.example.test.", dns.TypeA, Answer, true,
			[]string{"dn.example.test. 3600 IN DNAME in.example.test.", "host.DN.example.test. 3600 IN CNAME host.in.example.test.", "host.in.example.test. 3600 IN A 198.18.5.3"}, nil, nil},
		{"dname owner's own data", "dn.example.test.", dns.TypeA, Answer, true, []string{"dn.example.test. 3600 IN A 198.18.5.1"}, nil, nil},
		{"dname occludes", "x.dn.example.test.", dns.TypeA, NXDomain, true,
			[]string{"dn.example.test. 3600 IN DNAME in.example.test.", "x.dn.example.test. 3600 IN CNAME x.in.example.test."}, []string{soaNeg}, nil},
		{"dname out of zone", "a.ext.example.test.", dns.TypeA, Answer, true,
			[]string{"ext.example.test. 3600 IN DNAME elsewhere.test.", "a.ext.example.test. 3600 IN CNAME a.elsewhere.test."}, nil, nil},
		{"dname overflow", long, dns.TypeA, YXDomain, true,
			[]string{"long.example.test. 3600 IN DNAME bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc.dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd.test."}, nil, nil},
		{"any", "Static.example.test.", dns.TypeANY, Answer, true, []string{`Static.example.test. 3600 IN HINFO "RFC8482" ""`}, nil, nil},
		{"any at dynamic-only name", "web.example.test.", dns.TypeANY, Answer, true, []string{`web.example.test. 3600 IN HINFO "RFC8482" ""`}, nil, nil},
		{"any at empty non-terminal", "ent.example.test.", dns.TypeANY, NoData, true, nil, []string{soaNeg}, nil},
		{"any nxdomain", "nothere.example.test.", dns.TypeANY, NXDomain, true, nil, []string{soaNeg}, nil},
		{"do in an unsigned zone", "static.example.test.", dns.TypeAAAA, Answer, true, []string{"static.example.test. 60 IN AAAA fd53::10"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := z.Lookup(tt.qname, tt.qtype, tt.name == "do in an unsigned zone")
			if r.Kind != tt.kind || r.Authoritative != tt.aa {
				t.Errorf("kind %d aa %v, want %d %v", r.Kind, r.Authoritative, tt.kind, tt.aa)
			}
			for _, s := range []struct {
				name      string
				got, want []string
			}{{"answer", rrs(r.Answer), tt.answer}, {"authority", rrs(r.Ns), tt.ns}, {"additional", rrs(r.Extra), tt.extra}} {
				if !slices.Equal(s.got, s.want) {
					t.Errorf("%s:\n got %q\nwant %q", s.name, s.got, s.want)
				}
			}
		})
	}
}

func TestLookupDynamicName(t *testing.T) {
	z := loadExample(t)
	r := z.Lookup("To-Web.example.test.", dns.TypeA, false)
	if r.DynamicName != "web.example.test." || r.DynamicType != dns.TypeA {
		t.Errorf("dynamic %q %d, want web.example.test. A", r.DynamicName, r.DynamicType)
	}
	// A dynamic CNAME meets every type: the caller selects it and
	// follows it.
	r = z.Lookup("DynCname.example.test.", dns.TypeAAAA, false)
	if r.DynamicName != "dyncname.example.test." || r.DynamicType != dns.TypeCNAME {
		t.Errorf("dynamic %q %d, want dyncname.example.test. CNAME", r.DynamicName, r.DynamicType)
	}
}

func TestLookupLeavesZoneUntouched(t *testing.T) {
	z := loadExample(t)
	z.Lookup("STATIC.example.test.", dns.TypeA, false)
	z.Lookup("static.example.test.", dns.TypeA, false)
	for s := range z.DataPlaneSets() {
		if s.Name == "static.example.test." && s.Type == dns.TypeA {
			if got := s.RRs[0].Header().Name; got != "Static.example.test." {
				t.Errorf("zone record renamed to %q", got)
			}
		}
	}
}

func TestMarkDynamic(t *testing.T) {
	tests := []struct {
		name  string
		qtype uint16
		err   string
	}{
		{"new.example.test.", dns.TypeAAAA, ""},
		{"New.Example.Test", dns.TypeA, ""},
		{"a.b.new.example.test.", dns.TypeA, ""},
		{"web.example.test.", dns.TypeMX, "only A, AAAA and CNAME"},
		{"static.example.test.", dns.TypeCNAME, "must hold alone"},
		{"example.test.", dns.TypeCNAME, "must hold alone"},
		{"web.example.test.", dns.TypeCNAME, "must hold alone"},
		{"dyncname.example.test.", dns.TypeA, "the name has a CNAME"},
		{"dyncname.example.test.", dns.TypeCNAME, "the name has a CNAME"},
		{"www.elsewhere.test.", dns.TypeA, "outside the zone"},
		{"*.wild.example.test.", dns.TypeA, "wildcard"},
		{"sub.example.test.", dns.TypeA, "zone cut"},
		{"ns.sub.example.test.", dns.TypeAAAA, "zone cut"},
		{"y.dn.example.test.", dns.TypeA, "DNAME"},
		{"alias.example.test.", dns.TypeA, "CNAME"},
		{"static.example.test.", dns.TypeAAAA, "zone file has this set"},
		{"web.example.test.", dns.TypeA, "already dynamic"},
	}
	z := loadExample(t)
	for _, tt := range tests {
		err := z.MarkDynamic(tt.name, tt.qtype)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.err)
		}
	}
	if r := z.Lookup("b.new.example.test.", dns.TypeA, false); r.Kind != NoData {
		t.Errorf("parent of a dynamic name: kind %d, want NoData", r.Kind)
	}
}

func TestDataPlaneSets(t *testing.T) {
	z := loadExample(t)
	var got []string
	for s := range z.DataPlaneSets() {
		got = append(got, s.Name+" "+dns.TypeToString[s.Type]+" "+strings.Join(rrs(s.RRs), ","))
		if s.TTL != s.RRs[0].Header().Ttl {
			t.Errorf("%s: TTL %d, records %d", s.Name, s.TTL, s.RRs[0].Header().Ttl)
		}
	}
	want := []string{
		"a.b.ent.example.test. A a.b.ent.example.test. 3600 IN A 198.18.3.1",
		"dn.example.test. A dn.example.test. 3600 IN A 198.18.5.1",
		"host.in.example.test. A host.in.example.test. 3600 IN A 198.18.5.3",
		"mail.example.test. A mail.example.test. 3600 IN A 198.18.0.25",
		"mail.example.test. AAAA mail.example.test. 3600 IN AAAA fd53::25",
		"ns1.example.test. A ns1.example.test. 3600 IN A 198.18.0.53",
		"sip.example.test. A sip.example.test. 3600 IN A 198.18.0.60",
		"static.example.test. A Static.example.test. 3600 IN A 198.18.1.10,static.example.test. 3600 IN A 198.18.1.11",
		"static.example.test. AAAA static.example.test. 60 IN AAAA fd53::10",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadErrors(t *testing.T) {
	const head = "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n"
	tests := []struct {
		name, text, err string
	}{
		{"syntax", head + "www A 1.2.3\n", `:4:7: bad A A: "1.2.3"`},
		{"syntax later on the line", head + "\nmail  IN A    300.1.2.3\n", `:5:15: bad A A: "300.1.2.3"`},
		{"no soa", "$TTL 60\n@ NS ns1\n", "no SOA at the apex example.test."},
		{"no apex ns", "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n", "no NS at the apex"},
		{"outside", head + "www.other.test. A 192.0.2.1\n", "www.other.test. A: outside the zone example.test."},
		{"second soa", head + "@ SOA ns2 h 2 2 3 4 5\n", "second SOA"},
		{"soa below apex", head + "www SOA ns1 h 1 2 3 4 5\n", "SOA below the apex"},
		{"class", head + "www CH A 192.0.2.1\n", "only IN"},
		{"cname and data", head + "www CNAME x\nwww A 192.0.2.1\n", "www.example.test.: CNAME and A"},
		{"two cnames", head + "www CNAME x\nwww CNAME y\n", "more than one CNAME"},
		{"include", head + "$INCLUDE /etc/hosts\n", "$INCLUDE directive not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "zone")
			if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load("example.test.", path)
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), path) {
				t.Errorf("error %v, want one naming %s with %q", err, path, tt.err)
			}
		})
	}
}

func TestTTLsOfASetAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zone")
	text := "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nwww 300 A 192.0.2.1\nwww 30 A 192.0.2.2\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := Load("example.test", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range z.Lookup("www.example.test.", dns.TypeA, false).Answer {
		if rr.Header().Ttl != 30 {
			t.Errorf("%v: want the set's lowest TTL, 30", rr)
		}
	}
}

// TestLargeSetDuplicates: a set past manyRecords drops a record it holds
// as a small set does: a name in RDATA in another case is the same
// record, a TXT string in another case is not (RFC 2181 §5, RFC 4343).
func TestLargeSetDuplicates(t *testing.T) {
	var b strings.Builder
	b.WriteString("$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n")
	const n = 3 * manyRecords
	for range 2 {
		for i := range n {
			fmt.Fprintf(&b, "www A 198.18.%d.%d\nmx MX 10 Host%d\nmx MX 10 host%d\ntxt TXT t%d\ntxt TXT T%d\n", i>>8, i&0xff, i, i, i, i)
		}
	}
	path := filepath.Join(t.TempDir(), "zone")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := Load("example.test", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		qtype uint16
		want  int
	}{{"www", dns.TypeA, n}, {"mx", dns.TypeMX, n}, {"txt", dns.TypeTXT, 2 * n}} {
		if got := len(z.Lookup(c.name+".example.test.", c.qtype, false).Answer); got != c.want {
			t.Errorf("%s %s: %d records, want %d", c.name, dns.TypeToString[c.qtype], got, c.want)
		}
	}
}

func TestZonesFind(t *testing.T) {
	parent := loadExample(t)
	path := filepath.Join(t.TempDir(), "zone")
	if err := os.WriteFile(path, []byte("$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	child, err := Load("sub.example.test.", path)
	if err != nil {
		t.Fatal(err)
	}
	zs := NewZones(parent, child)
	for _, tt := range []struct {
		qname string
		want  *Zone
	}{
		{"example.test.", parent},
		{"WWW.Example.Test.", parent},
		{"sub.example.test.", child},
		{"a.b.SUB.example.test.", child},
		{"xsub.example.test.", parent},
		{"test.", nil},
		{"other.", nil},
		{".", nil},
	} {
		if got := zs.Find(tt.qname); got != tt.want {
			t.Errorf("Find(%q) = %v, want %v", tt.qname, got, tt.want)
		}
	}
	if (*Zones)(nil).Find("example.test.") != nil {
		t.Error("nil Zones found a zone")
	}
}

func TestCanonicalOrder(t *testing.T) {
	// RFC 4034 §6.1.
	want := []string{`example.`, `a.example.`, `yljkjljk.a.example.`, `Z.a.example.`, `zABC.a.EXAMPLE.`,
		`z.example.`, `\001.z.example.`, `*.z.example.`, `\200.z.example.`}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, canonicalCompare)
	if !slices.Equal(got, want) {
		t.Errorf("got %q", got)
	}
}

// holds and labelStarts replace dns.IsSubDomain and dns.Split on the query
// path; a name on the wrong side of the origin would be answered from the
// wrong zone, or refused.
func TestHoldsAndLabelStartsAgreeWithDNS(t *testing.T) {
	names := []string{
		".", "test.", "example.test.", "www.example.test.", "a.b.example.test.",
		"xexample.test.", "example.test.x.", `a\.example.test.`, `a\\.example.test.`,
		`a\\\.example.test.`, `\.example.test.`, "example.tes.", "other.test.",
	}
	for _, origin := range []string{".", "test.", "example.test."} {
		z := &Zone{origin: origin}
		for _, n := range names {
			if got, want := z.holds(n), dns.IsSubDomain(origin, n); got != want {
				t.Errorf("origin %s holds %s: %v, dns.IsSubDomain: %v", origin, n, got, want)
			}
		}
	}
	for _, n := range names {
		if got, want := labelStarts(n, nil), dns.Split(n); !slices.Equal(got, want) {
			t.Errorf("labelStarts(%s) = %v, dns.Split: %v", n, got, want)
		}
	}
}

// A dynamic set's lookup, and a static set's asked as the zone spells it,
// are on every query the fallback answers for them.
func TestLookupAllocations(t *testing.T) {
	z := loadExample(t)
	for _, name := range []string{"web.example.test.", "mail.example.test."} {
		if n := testing.AllocsPerRun(100, func() { z.Lookup(name, dns.TypeA, false) }); n != 0 {
			t.Errorf("the lookup of %s allocates %v times, want 0", name, n)
		}
	}
}
