package records

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/zone"
)

const aliasCfg = `server:
  listen: ["198.18.0.2:53"]
zones:
  - origin: example.test.
    file: z.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80 }
  web2: { type: tcp, target: 198.18.1.2, port: 80 }
  other: { type: tcp, target: 198.18.1.9, port: 80 }
records:
  - name: lb.example.test.
    type: A
    ttl: 30
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web2 }
  - name: example.test.
    type: A
    ttl: 60
    ttl_degraded: 10
    policy: failover
    answers:
      - { alias: lb.example.test, evaluate_target_health: true }
      - { value: 198.18.1.9, priority: 1 }
  - name: api.example.test.
    type: A
    ttl: 45
    answers:
      - { alias: lb.example.test, evaluate_target_health: true }
  - name: ns.example.test.
    type: A
    answers:
      - alias: ns1.example.test
  - name: strict.example.test.
    type: A
    when_all_down: nodata
    answers:
      - { alias: lb.example.test, evaluate_target_health: true }
  - name: mixed.example.test.
    type: A
    answers:
      - alias: lb.example.test
      - value: 198.18.1.1
      - value: 198.18.1.8
  - name: www.example.test.
    type: CNAME
    ttl: 20
    policy: failover
    answers:
      - { value: LB.example.test, check: other }
      - { value: api.example.test, priority: 1 }
`

// aliasEntries are the health-table entries of aliasCfg's checks.
var aliasEntries = map[string]uint32{"web1": 1, "web2": 2, "other": 3, config.TargetCheckID("lb.example.test.", dns.TypeA): 4}

func compileAliases(t *testing.T, text string) (*Compiled, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte(zoneText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(filepath.Join(dir, "c.yaml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	z, err := zone.Load("example.test.", filepath.Join(dir, "z.zone"))
	if err != nil {
		t.Fatal(err)
	}
	return Compile(cfg, []*zone.Zone{z}, func(id, region string) (uint32, bool) {
		i, ok := aliasEntries[id]
		return i, ok && region == ""
	})
}

// TestCompileAliases: a set whose one answer is an alias is a copy of its
// target for XDP; a set that nests the target's selection, and a CNAME
// set, stay out of the record table.
func TestCompileAliases(t *testing.T) {
	c, err := compileAliases(t, aliasCfg)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	entries := maps.Collect(c.Entries())
	for _, tc := range []struct {
		name  string
		qtype uint16
		xdp   bool
	}{
		{"lb.example.test.", dns.TypeA, true},
		{"api.example.test.", dns.TypeA, true},
		{"ns.example.test.", dns.TypeA, true},
		{"example.test.", dns.TypeA, false},
		{"strict.example.test.", dns.TypeA, false},
		{"mixed.example.test.", dns.TypeA, false},
		{"www.example.test.", dns.TypeCNAME, false},
	} {
		s := c.Lookup(tc.name, tc.qtype)
		if s == nil {
			t.Fatalf("%s not compiled", tc.name)
		}
		_, in := entries[s.Key()]
		same(tc.name+" in the record table", in, tc.xdp)
		same(tc.name+" left to the fallback", s.Fallback, !tc.xdp)
	}
	nests := " A nests the selection of an alias's target in its own, which XDP does not do: the fallback answers it"
	same("warnings", c.Warnings[1:], []string{"example.test." + nests, "strict.example.test." + nests, "mixed.example.test." + nests})
	lb, api := c.Lookup("lb.example.test.", dns.TypeA), c.Lookup("api.example.test.", dns.TypeA)
	want := data(lb)
	want.Ttl = 45
	same("api copies lb", data(api), want)
	same("api addresses", api.Addrs(), lb.Addrs())
	same("api checks", api.Checks(), []string{"web1", "web2"})
	ns := c.Lookup("ns.example.test.", dns.TypeA)
	same("ns copies ns1", ns.Addrs(), []netip.Addr{netip.MustParseAddr("198.18.0.2")})
	apex := c.Lookup("example.test.", dns.TypeA)
	same("apex answers", []string{apex.Answer(0), apex.Answer(1)}, []string{"alias lb.example.test.", "198.18.1.9"})
	same("apex checks", apex.Checks(), []string{"alias:lb.example.test.:A", ""})
	same("apex alias entry", data(apex).Cand[0].Check, uint32(4))
	www := c.Lookup("www.example.test.", dns.TypeCNAME)
	same("cname", []any{data(www).MaxAnswers, www.Answer(0), www.Answer(1)}, []any{uint8(1), "lb.example.test.", "api.example.test."})
}

// downs is a health table with the listed entries down.
type downs []uint32

func (d downs) Up(i uint32) bool { return !slices.Contains(d, i) }
func (downs) Open(uint8) bool    { return false }

// TestAliasAnswers: alias and CNAME sets answer through the fallback's
// Records at each state of their targets. The entry of the alias's target
// health (4) is down exactly when both of lb's checks are, as the
// aggregator computes it.
func TestAliasAnswers(t *testing.T) {
	c, err := compileAliases(t, aliasCfg)
	if err != nil {
		t.Fatal(err)
	}
	const (
		web1, web2, other, lbHealth = 1, 2, 3, 4
	)
	lbDown := downs{web1, web2, lbHealth}
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		health downs
		action fallback.Action
		ttl    uint32
		want   []string // sorted: multivalue starts at a random candidate
	}{
		{"apex alias: the target's answers", "example.test.", dns.TypeA, nil, fallback.Answer, 60, []string{"198.18.1.1", "198.18.1.2"}},
		{"apex alias: the target's selection, degraded", "example.test.", dns.TypeA, downs{web1}, fallback.Answer, 10, []string{"198.18.1.2"}},
		{"apex alias: target down, the backup value", "example.test.", dns.TypeA, lbDown, fallback.Answer, 10, []string{"198.18.1.9"}},
		{"copy: the target's answers", "api.example.test.", dns.TypeA, downs{web2}, fallback.Answer, 45, []string{"198.18.1.1"}},
		{"copy: the target failing open", "api.example.test.", dns.TypeA, lbDown, fallback.Answer, 45, []string{"198.18.1.1", "198.18.1.2"}},
		{"copy of zone data", "ns.example.test.", dns.TypeA, lbDown, fallback.Answer, 60, []string{"198.18.0.2"}},
		{"when_all_down of the alias", "strict.example.test.", dns.TypeA, lbDown, fallback.NoData, 60, nil},
		{"strict while the target is up", "strict.example.test.", dns.TypeA, downs{web1}, fallback.Answer, 60, []string{"198.18.1.2"}},
		{"mixed: each address once", "mixed.example.test.", dns.TypeA, nil, fallback.Answer, 60, []string{"198.18.1.1", "198.18.1.2", "198.18.1.8"}},
		{"mixed: alias without evaluate_target_health", "mixed.example.test.", dns.TypeA, lbDown, fallback.Answer, 60, []string{"198.18.1.1", "198.18.1.2", "198.18.1.8"}},
		{"cname: the primary target", "www.example.test.", dns.TypeCNAME, nil, fallback.Answer, 20, []string{"lb.example.test."}},
		{"cname: its check down, the next", "www.example.test.", dns.TypeCNAME, downs{other}, fallback.Answer, 20, []string{"api.example.test."}},
		{"cname: answers a name, not an address", "www.example.test.", dns.TypeA, nil, 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAnswerer(c, tc.health, nil)
			sel, ok := a.Select(tc.qname, tc.qtype, fallback.Query{Client: netip.MustParseAddr("198.18.9.1")}, nil)
			if tc.ttl == 0 {
				if ok {
					t.Errorf("found %+v, want no set", sel)
				}
				return
			}
			var got []string
			for _, x := range sel.Addrs {
				got = append(got, x.String())
			}
			if sel.Target != "" {
				got = append(got, sel.Target)
			}
			slices.Sort(got)
			if !ok || sel.Action != tc.action || sel.TTL != tc.ttl || !slices.Equal(got, tc.want) {
				t.Errorf("got ok %v action %d ttl %d %v, want action %d ttl %d %v", ok, sel.Action, sel.TTL, got, tc.action, tc.ttl, tc.want)
			}
		})
	}
}

func TestCompileAliasRefuses(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"alias to a name without the set", "alias: ns1.example.test", "alias: nothere.example.test",
			"/c.yaml:33: records[3].answers[0].alias: nothere.example.test. has no A set in records or the zone files to alias"},
		{"alias to a CNAME of the zone", "alias: ns1.example.test", "alias: alias.example.test",
			"/c.yaml:33: records[3].answers[0].alias: alias.example.test. has no A set in records or the zone files to alias"},
		{"CNAME beside zone data", "name: www.example.test.", "name: big.example.test.",
			"/c.yaml:45: records[6].name: big.example.test. CNAME: the zone file has data at the name, which a CNAME must hold alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileAliases(t, strings.Replace(aliasCfg, tc.from, tc.to, 1))
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}
