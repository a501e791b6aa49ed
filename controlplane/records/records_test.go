package records

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/dnssec"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/zone"
)

const zoneText = `$ORIGIN example.test.
$TTL 300
@      SOA ns1 hostmaster 1 7200 3600 1209600 300
@      NS  ns1
ns1    A   198.18.0.2
big    A   198.18.2.1
big    A   198.18.2.2
big    A   198.18.2.3
big    A   198.18.2.4
big    A   198.18.2.5
big    A   198.18.2.6
big    A   198.18.2.7
big    A   198.18.2.8
big    A   198.18.2.9
alias  CNAME ns1
sub    NS  ns.sub
ns.sub A   198.18.5.1
`

const cfgText = `server:
  listen: ["198.18.0.2:53"]
  geo:
    regions:
      eu: { prefixes: ["198.18.0.0/24"] }
zones:
  - origin: example.test.
    file: z.zone
health_checks:
  a: { type: tcp, target: 198.18.1.1, port: 80 }
  b: { type: tcp, target: 198.18.1.2, port: 80 }
records:
  - name: WWW.example.test.
    type: A
    ttl: 20
    ttl_degraded: 5
    policy: failover
    min_healthy: 50%
    when_all_down: nodata
    answers:
      - { value: 198.18.1.1, check: a, priority: 1 }
      - { value: 198.18.1.2, check: b, priority: 2 }
      - { value: 198.18.1.3, check: b, backup: true, region: eu }
`

func compile(t *testing.T, cfgText string) (*Compiled, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte(zoneText), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yaml")
	cfg, err := config.Parse(path, []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	z, err := zone.Load("example.test.", filepath.Join(dir, "z.zone"))
	if err != nil {
		t.Fatal(err)
	}
	// Candidates of a region read an entry of their own: b's in eu, 11.
	index := map[[2]string]uint32{{"a", ""}: 7, {"b", ""}: 9, {"b", "eu"}: 11}
	return Compile(cfg, []*zone.Zone{z}, func(id, region string) (uint32, bool) { i, ok := index[[2]string{id, region}]; return i, ok })
}

func TestCompile(t *testing.T) {
	c, err := compile(t, cfgText)
	if err != nil {
		t.Fatal(err)
	}
	www := c.Lookup("www.example.test.", dns.TypeA)
	if www == nil || !www.Dynamic {
		t.Fatalf("www A not compiled as dynamic: %+v", www)
	}
	v := data(www)
	if v.N != 3 || v.Ttl != 20 || v.TtlDegraded != 5 || v.Policy != uint8(bpf.SteadydnsPolicyPOLICY_FAILOVER) || v.WhenAllDown != uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA) {
		t.Errorf("www A header %+v", v)
	}
	// 50% of 2 primaries.
	if v.MinHealthy != 1 {
		t.Errorf("min_healthy 50%% of 2 primaries compiled to %d, want 1", v.MinHealthy)
	}
	if v.Cand[0].Check != 7 || v.Cand[1].Check != 9 || v.Cand[2].Check != 11 || www.Regions()[2] != "eu" || v.Cand[0].Priority != 1 || v.Cand[2].Flags != uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP) || v.Cand[2].Region != 1 || v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_GEO) == 0 || v.Zone != 0 {
		t.Errorf("www A candidates %+v", v.Cand[:3])
	}
	if got := string(v.Cand[1].Addr[:4]); got != "\xc6\x12\x01\x02" {
		t.Errorf("candidate 1 address bytes %x", got)
	}
	if www.Key().Wire != "\x03www\x07example\x04test\x00" {
		t.Errorf("key %q", www.Key().Wire)
	}

	// Static sets: ns1 is in; glue below the cut is not; big has more
	// than K records and stays with the fallback, with a warning.
	if s := c.Lookup("ns1.example.test.", dns.TypeA); s == nil || s.Dynamic || data(s).MaxAnswers != 1 || data(s).Cand[0].Check != 0 {
		t.Errorf("ns1 A static set: %+v", s)
	}
	if s := c.Lookup("ns.sub.example.test.", dns.TypeA); s != nil {
		t.Errorf("glue below a cut compiled into the kernel: %+v", s)
	}
	if s := c.Lookup("big.example.test.", dns.TypeA); s != nil {
		t.Errorf("a 9-record set compiled into the kernel")
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "big.example.test.") {
		t.Errorf("warnings %q", c.Warnings)
	}
	if n := len(maps.Collect(c.Entries())); n != len(c.Sets) {
		t.Errorf("%d entries for %d sets", n, len(c.Sets))
	}
}

func TestCompileRejects(t *testing.T) {
	for _, c := range []struct{ name, owner string }{
		{"a record at a CNAME", "alias.example.test."},
		{"a record below a cut", "x.sub.example.test."},
		{"a name the zone file already has for the type", "ns1.example.test."},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := compile(t, strings.Replace(cfgText, "WWW.example.test.", c.owner, 1))
			if err == nil || !strings.Contains(err.Error(), "c.yaml:13: records[0].name:") {
				t.Errorf("got %v, want an error at c.yaml:10: records[0].name", err)
			}
		})
	}
}

// TestCompilePolicies: every value the config accepts for policy,
// when_all_down and stale_policy reaches the data plane as its own enum.
func TestCompilePolicies(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		field      func(v *bpf.SteadydnsRrset) uint8
		want       uint32
	}{
		{"policy", "multivalue", policyOf, uint32(bpf.SteadydnsPolicyPOLICY_MULTIVALUE)},
		{"policy", "failover", policyOf, uint32(bpf.SteadydnsPolicyPOLICY_FAILOVER)},
		{"policy", "weighted", policyOf, uint32(bpf.SteadydnsPolicyPOLICY_WEIGHTED)},
		{"policy", "round_robin", policyOf, uint32(bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN)},
		{"when_all_down", "answer_all", whenAllDownOf, uint32(bpf.SteadydnsWhenAllDownWHEN_DOWN_ANSWER_ALL)},
		{"when_all_down", "nodata", whenAllDownOf, uint32(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA)},
		{"when_all_down", "servfail", whenAllDownOf, uint32(bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL)},
		{"stale_policy", "keep", staleOf, uint32(bpf.SteadydnsStalePolicySTALE_KEEP)},
		{"stale_policy", "answer_all", staleOf, uint32(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL)},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c, err := compile(t, "server:\n  listen: [\"198.18.0.2:53\"]\nzones:\n  - origin: example.test.\n    file: z.zone\n"+
				"records:\n  - name: www.example.test.\n    type: A\n    "+tc.key+": "+tc.value+"\n    answers: [{value: 198.18.1.1}]\n")
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.field(&c.Lookup("www.example.test.", dns.TypeA).Data(new(bpf.Set)).SteadydnsRrset); uint32(got) != tc.want {
				t.Errorf("compiled to %d, want %d", got, tc.want)
			}
		})
	}
}

func policyOf(v *bpf.SteadydnsRrset) uint8      { return v.Policy }
func whenAllDownOf(v *bpf.SteadydnsRrset) uint8 { return v.WhenAllDown }
func staleOf(v *bpf.SteadydnsRrset) uint8       { return v.Stale }

// allUp is a health table with every entry up.
type allUp struct{}

func (allUp) Up(uint32) bool  { return true }
func (allUp) Open(uint8) bool { return false }

// TestSelectIntoRoom: a selection's addresses go into the room the caller
// lends, so the fallback's loop, which lends the same room to every query,
// allocates nothing for them, nor for the pick's order.
func TestSelectIntoRoom(t *testing.T) {
	// Without regions: steering is the geo table's, tested elsewhere.
	c, err := compile(t, strings.Replace(cfgText, ", region: eu", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	a := NewAnswerer(c, allUp{}, nil)
	room := make([]netip.Addr, 0, bpf.SteadydnsLimitsMAX_CANDIDATES)
	q := fallback.Query{Client: netip.MustParseAddr("198.18.9.1")}
	var sel fallback.Selection
	allocs := testing.AllocsPerRun(100, func() {
		var ok bool
		if sel, ok = a.Select("www.example.test.", dns.TypeA, q, room); !ok {
			t.Fatal("www A not found")
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per selection, want 0", allocs)
	}
	if len(sel.Addrs) == 0 || &sel.Addrs[0] != &room[:1][0] {
		t.Errorf("selection %v not in the room lent", sel.Addrs)
	}
}

// TestZoneIndexPastTheTable checks the zone byte of dynamic sets: a zone's
// index while XDP holds its SOA, and MAX_ZONES, past the SOA table, for a
// zone beyond it, so that XDP passes its NODATA to the fallback instead of
// answering with another zone's SOA (a wrapped byte).
func TestZoneIndexPastTheTable(t *testing.T) {
	held := int(bpf.SteadydnsLimitsMAX_ZONES)
	dir := t.TempDir()
	var cfgText strings.Builder
	cfgText.WriteString("server:\n  listen: [\"198.18.0.2:53\"]\nzones:\n")
	var zones []*zone.Zone
	for i := range held + 2 {
		origin := fmt.Sprintf("z%d.test.", i)
		file := filepath.Join(dir, fmt.Sprintf("z%d.zone", i))
		text := fmt.Sprintf("$ORIGIN %s\n@ 300 SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 300 NS ns1\nns1 300 A 198.18.0.2\n", origin)
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		z, err := zone.Load(origin, file)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, z)
		fmt.Fprintf(&cfgText, "  - origin: %s\n    file: %s\n", origin, file)
	}
	cfgText.WriteString("records:\n")
	want := map[int]uint8{0: 0, held - 1: uint8(held - 1), held: uint8(held), held + 1: uint8(held)}
	for i := range want {
		fmt.Fprintf(&cfgText, "  - name: www.z%d.test.\n    type: A\n    answers:\n      - { value: 198.18.1.1 }\n", i)
	}
	cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(cfgText.String()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(cfg, zones, func(string, string) (uint32, bool) { return 0, false })
	if err != nil {
		t.Fatal(err)
	}
	// A zone file's own set, ns1's, carries its zone as a record's does.
	for i, w := range want {
		for _, name := range []string{"www", "ns1"} {
			s := c.Lookup(fmt.Sprintf("%s.z%d.test.", name, i), dns.TypeA)
			if s == nil {
				t.Fatalf("%s.z%d.test. A not compiled", name, i)
			}
			if data(s).Zone != w {
				t.Errorf("%s.z%d.test. A: zone byte %d, want %d", name, i, data(s).Zone, w)
			}
		}
	}
}

// TestDataPlanePolicy: each policy the config accepts has its own enum,
// the one Compile writes, and a word the config rejects has none.
func TestDataPlanePolicy(t *testing.T) {
	want := map[config.Policy]bpf.SteadydnsPolicy{
		config.PolicyMultivalue: bpf.SteadydnsPolicyPOLICY_MULTIVALUE,
		config.PolicyFailover:   bpf.SteadydnsPolicyPOLICY_FAILOVER,
		config.PolicyWeighted:   bpf.SteadydnsPolicyPOLICY_WEIGHTED,
		config.PolicyRoundRobin: bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN,
	}
	for p, n := range want {
		if got, ok := DataPlanePolicy(p); !ok || got != n {
			t.Errorf("%s: %d, %v; want %d", p, got, ok, n)
		}
	}
	if got, ok := DataPlanePolicy("random"); ok {
		t.Errorf("random: %d, want none", got)
	}
}

// TestSignedOnline: every set of a zone signed online, health-checked or
// not, carries RR_SIGNED, so XDP passes its DO queries to the fallback.
func TestSignedOnline(t *testing.T) {
	for _, online := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte(zoneText), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(cfgText+"  - name: lb.example.test.\n    type: A\n    answers: [{alias: www.example.test.}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		z, err := zone.Load("example.test.", filepath.Join(dir, "z.zone"))
		if err != nil {
			t.Fatal(err)
		}
		if online {
			keys, err := dnssec.Generate(filepath.Join(dir, "keys"), "example.test.", dns.ED25519, false, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			s, err := dnssec.NewSigner("example.test.", keys, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if err := z.SignOnline(s); err != nil {
				t.Fatal(err)
			}
		}
		index := map[[2]string]uint32{{"a", ""}: 7, {"b", ""}: 9, {"b", "eu"}: 11}
		c, err := Compile(cfg, []*zone.Zone{z}, func(id, region string) (uint32, bool) { i, ok := index[[2]string{id, region}]; return i, ok })
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"www.example.test.", "ns1.example.test.", "lb.example.test."} {
			s := c.Lookup(name, dns.TypeA)
			if s == nil {
				t.Fatalf("%s A not compiled", name)
			}
			if got := data(s).Flags&uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED) != 0; got != online {
				t.Errorf("online %v: %s A signed flag %v", online, name, got)
			}
		}
	}
}

// TestWireAsPacked holds Wire's own encoding to the packer's, lowercased,
// for names at and past every limit: a key that differs from the one the
// program computes from a query would leave its set unanswered in XDP.
func TestWireAsPacked(t *testing.T) {
	label := func(n int) string { return strings.Repeat("a", n) }
	long := func(total int) string { // a name of total bytes, fqdn
		var parts []string
		for total > 0 {
			n := min(63, total-1)
			parts = append(parts, label(n))
			total -= n + 1
		}
		return strings.Join(parts, ".") + "."
	}
	names := []string{".", "WWW.Example.Test.", "www.example.test", "a..test.", ".a.", "x" + label(63) + ".test.", label(63) + ".test.",
		long(253), long(254), long(255), `a\.b.test.`, `A\065.test.`, "n123456.bench.test."}
	for _, name := range names {
		var buf [256]byte
		want := ""
		if n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(name)), buf[:], 0, nil, false); err == nil {
			want = string(buf[:n])
		}
		if got := Wire(name); got != want {
			t.Errorf("Wire(%q) = %q, want %q", name, got, want)
		}
	}
}

// data is s's data-plane set, a copy.
func data(s *Set) bpf.Set { return *s.Data(new(bpf.Set)) }

// TestSetIndex finds each of many sets by name and type, and no other:
// a name's two types apart, an absent type or name, and of two sets of
// one name and type the later.
func TestSetIndex(t *testing.T) {
	var c Compiled
	for i := range 5000 {
		name := fmt.Sprintf("n%d.example.test.", i)
		c.add(&Set{Name: name, Type: dns.TypeA})
		c.add(&Set{Name: name, Type: dns.TypeAAAA})
	}
	later := &Set{Name: "n7.example.test.", Type: dns.TypeA, ttl: 1}
	c.add(later)
	c.byName.build(c.Sets)
	for _, s := range c.Sets[:len(c.Sets)-1] {
		want := s
		if s.Name == later.Name && s.Type == later.Type {
			want = later
		}
		if got := c.Lookup(strings.ToUpper(s.Name), s.Type); got != want {
			t.Fatalf("%s %d: found %+v, want %+v", s.Name, s.Type, got, want)
		}
	}
	for _, miss := range []struct {
		name  string
		qtype uint16
	}{{"n1.example.test.", dns.TypeCNAME}, {"n5000.example.test.", dns.TypeA}, {"example.test.", dns.TypeA}} {
		if got := c.Lookup(miss.name, miss.qtype); got != nil {
			t.Errorf("%s %d: found %+v, want none", miss.name, miss.qtype, got)
		}
	}
	if got := new(Compiled).Lookup("n1.example.test.", dns.TypeA); got != nil {
		t.Errorf("an empty index found %+v", got)
	}
}
