package bpf_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// A policy case: one record set (its YAML after name and type, whose
// answers use checks named c1, c2…), the checks that are down, the client,
// and the answers each path may give, each in answer order: a random
// policy may give several, but the order of each is the selection's.
type policyCase struct {
	name    string
	record  string
	down    []string
	client  string     // source address; default 198.18.0.1, region eu
	allowed [][]string // possible answers, each in answer order
	rcode   int
	nodata  bool
	ttl     uint32
}

var policyCases = []policyCase{
	{name: "multivalue all healthy", record: "policy: multivalue\n    max_answers: 2\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}]",
		allowed: [][]string{{"198.18.1.1", "198.18.1.2"}, {"198.18.1.2", "198.18.1.3"}, {"198.18.1.3", "198.18.1.1"}}},
	{name: "multivalue one down", record: "policy: multivalue\n    max_answers: 2\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}]",
		down: []string{"c2"}, allowed: [][]string{{"198.18.1.1", "198.18.1.3"}}},
	{name: "failover primary", record: "policy: failover\n    answers: [{value: 198.18.1.1, check: c1, priority: 0}, {value: 198.18.1.2, check: c2, priority: 0}, {value: 198.18.1.3, check: c3, priority: 1}]",
		allowed: [][]string{{"198.18.1.1", "198.18.1.2"}}},
	{name: "failover one primary down", record: "policy: failover\n    answers: [{value: 198.18.1.1, check: c1, priority: 0}, {value: 198.18.1.2, check: c2, priority: 0}, {value: 198.18.1.3, check: c3, priority: 1}]",
		down: []string{"c1"}, allowed: [][]string{{"198.18.1.2"}}},
	{name: "failover to the next priority", record: "policy: failover\n    answers: [{value: 198.18.1.1, check: c1, priority: 0}, {value: 198.18.1.2, check: c2, priority: 0}, {value: 198.18.1.3, check: c3, priority: 1}]",
		down: []string{"c1", "c2"}, allowed: [][]string{{"198.18.1.3"}}},
	{name: "failover all down answers the primaries", record: "policy: failover\n    answers: [{value: 198.18.1.1, check: c1, priority: 0}, {value: 198.18.1.2, check: c2, priority: 0}, {value: 198.18.1.3, check: c3, priority: 1}]",
		down: []string{"c1", "c2", "c3"}, allowed: [][]string{{"198.18.1.1", "198.18.1.2"}}},
	{name: "weighted never weight 0 while others are healthy", record: "policy: weighted\n    answers: [{value: 198.18.1.1, check: c1, weight: 0}, {value: 198.18.1.2, check: c2, weight: 5}, {value: 198.18.1.3, check: c3, weight: 5}]",
		allowed: [][]string{{"198.18.1.2"}, {"198.18.1.3"}}},
	{name: "weighted weight 0 when nothing else is healthy", record: "policy: weighted\n    answers: [{value: 198.18.1.1, check: c1, weight: 0}, {value: 198.18.1.2, check: c2, weight: 5}, {value: 198.18.1.3, check: c3, weight: 5}]",
		down: []string{"c2", "c3"}, allowed: [][]string{{"198.18.1.1"}}},
	{name: "round robin", record: "policy: round_robin\n    max_answers: 1\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}]",
		down: []string{"c3"}, allowed: [][]string{{"198.18.1.1"}, {"198.18.1.2"}}},
	{name: "backup held back", record: "answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2, backup: true}]",
		allowed: [][]string{{"198.18.1.1"}}},
	{name: "backup takes over", record: "answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2, backup: true}]",
		down: []string{"c1"}, allowed: [][]string{{"198.18.1.2"}}},
	{name: "backup stays back when all are down", record: "answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2, backup: true}]",
		down: []string{"c1", "c2"}, allowed: [][]string{{"198.18.1.1"}}},
	{name: "min_healthy keeps failing open", record: "min_healthy: 2\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}]",
		down: []string{"c1", "c2"}, allowed: [][]string{{"198.18.1.1", "198.18.1.2", "198.18.1.3"}}},
	{name: "min_healthy met", record: "min_healthy: 66%\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}]",
		down: []string{"c1"}, allowed: [][]string{{"198.18.1.2", "198.18.1.3"}}},
	{name: "when_all_down nodata", record: "when_all_down: nodata\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}]",
		down: []string{"c1", "c2"}, allowed: [][]string{nil}, nodata: true},
	{name: "when_all_down servfail", record: "when_all_down: servfail\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}]",
		down: []string{"c1", "c2"}, allowed: [][]string{nil}, rcode: dns.RcodeServerFailure},
	{name: "ttl_degraded", record: "ttl: 30\n    ttl_degraded: 5\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}]",
		down: []string{"c2"}, allowed: [][]string{{"198.18.1.1"}}, ttl: 5},
	{name: "ttl while healthy", record: "ttl: 30\n    ttl_degraded: 5\n    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}]",
		allowed: [][]string{{"198.18.1.1", "198.18.1.2"}}, ttl: 30},
	{name: "geo own region", record: "answers: [{value: 198.18.1.1, check: c1, region: eu}, {value: 198.18.1.2, check: c2, region: us}]",
		allowed: [][]string{{"198.18.1.1"}}},
	{name: "geo other region's client", record: "answers: [{value: 198.18.1.1, check: c1, region: eu}, {value: 198.18.1.2, check: c2, region: us}]",
		client: "198.18.0.200", allowed: [][]string{{"198.18.1.2"}}},
	{name: "geo fails over to the next region", record: "answers: [{value: 198.18.1.1, check: c1, region: eu}, {value: 198.18.1.2, check: c2, region: us}]",
		down: []string{"c1"}, allowed: [][]string{{"198.18.1.2"}}},
	{name: "geo unknown client gets every region", record: "answers: [{value: 198.18.1.1, check: c1, region: eu}, {value: 198.18.1.2, check: c2, region: us}]",
		client: "198.18.9.9", allowed: [][]string{{"198.18.1.1", "198.18.1.2"}}},
	{name: "pool failover to the lowest priority, past the slot's eight", record: "policy: failover\n    answers: [" + poolAnswers(20, 18) + "]",
		allowed: [][]string{{"198.18.1.19", "198.18.1.20"}}},
	{name: "pool failover to the next priority, eight of eighteen", record: "policy: failover\n    answers: [" + poolAnswers(20, 18) + "]",
		down: []string{"c2"}, allowed: [][]string{addrs(1, 8)}},
	{name: "pool of 64, its last candidate the one healthy", record: "answers: [" + poolAnswers(64, 63) + "]",
		down: []string{"c1"}, allowed: [][]string{{"198.18.1.64"}}},
}

// poolAnswers is n answers 198.18.1.1 … n: the first lead of them with
// check c1 and priority 1, the rest with check c2 and priority 0.
func poolAnswers(n, lead int) string {
	var as []string
	for i := 1; i <= n; i++ {
		check, prio := "c2", 0
		if i <= lead {
			check, prio = "c1", 1
		}
		as = append(as, fmt.Sprintf("{value: 198.18.1.%d, check: %s, priority: %d}", i, check, prio))
	}
	return strings.Join(as, ", ")
}

// addrs is 198.18.1.from … to, in order.
func addrs(from, to int) []string {
	var as []string
	for i := from; i <= to; i++ {
		as = append(as, fmt.Sprintf("198.18.1.%d", i))
	}
	return as
}

const policyZone = `$ORIGIN example.test.
$TTL 300
@   SOA ns1 hostmaster 1 7200 3600 1209600 120
@   NS  ns1
ns1 A   198.18.0.2
`

// policyWorld compiles every case into one config, the maps and a
// fallback server on loopback, all reading the same health table.
type policyWorld struct {
	objs   *loader.Objects
	server *fallback.Server
	addr   string
}

type mapHealth struct{ o *loader.Objects }

func (h mapHealth) Up(i uint32) bool { return h.o.HealthUpAt(i) }
func (h mapHealth) Open(uint8) bool  { return false }

func newPolicyWorld(t *testing.T) *policyWorld {
	o := load(t)
	var b strings.Builder
	b.WriteString("server:\n  listen: [\"127.0.0.1:53\"]\n  geo:\n    regions:\n      eu: { prefixes: [\"198.18.0.0/25\"], next: [us] }\n      us: { prefixes: [\"198.18.0.128/25\"], next: [eu] }\n")
	b.WriteString("zones:\n  - origin: example.test.\n    file: z.zone\nhealth_checks:\n")
	for i := range policyCases {
		for c := 1; c <= 3; c++ {
			fmt.Fprintf(&b, "  p%dc%d: { type: tcp, target: 198.18.1.%d, port: 80 }\n", i, c, c)
		}
	}
	b.WriteString("records:\n")
	for i, c := range policyCases {
		rec := c.record
		for k := 3; k >= 1; k-- {
			rec = strings.ReplaceAll(rec, fmt.Sprintf("check: c%d", k), fmt.Sprintf("check: p%dc%d", i, k))
		}
		fmt.Fprintf(&b, "  - name: p%d.example.test.\n    type: A\n    %s\n", i, rec)
	}
	sv := serve(t, o, b.String(), policyZone)
	cfg, z, index, comp, g := sv.cfg, sv.zone, sv.index, sv.comp, sv.geo
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	healthtable.Put(table, 0, true, 0)
	for i, c := range policyCases {
		for k := 1; k <= 3; k++ {
			healthtable.Put(table, index[fmt.Sprintf("p%dc%d", i, k)], !slices.Contains(c.down, fmt.Sprintf("c%d", k)), 0)
		}
	}
	if _, err := o.PushHealth(table, 1, cfg.Hash, 0); err != nil {
		t.Fatal(err)
	}

	srv := fallback.New(fallback.Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}},
		&fallback.View{Zones: zone.NewZones(z), Records: records.NewAnswerer(comp, mapHealth{o}, g)})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &policyWorld{objs: o, server: srv, addr: srv.Addrs()[0].String()}
}

type outcome struct {
	rcode  int
	answer []string
	nodata bool // NOERROR, no answer, the zone's SOA in authority
	ttl    uint32
}

func summarize(m *dns.Msg) outcome {
	o := outcome{rcode: m.Rcode}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			o.answer = append(o.answer, a.A.String())
			o.ttl = a.Hdr.Ttl
		}
	}
	o.nodata = m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0 && len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA
	return o
}

func (w *policyWorld) xdp(t *testing.T, name, client string) outcome {
	// The program draws from the port and ID, which clients pick at random.
	f := frame(false, query(name, dns.TypeA, func(m *dns.Msg) { m.Id = uint16(rand.Uint32()) }), packet.Full)
	f.Src = netip.AddrPortFrom(netip.MustParseAddr(client), uint16(1024+rand.IntN(64512)))
	ret, out := run(t, w.objs, packet.Build(f))
	if ret != 3 {
		t.Fatalf("%s from %s: xdp passed (action %d)", name, client, ret)
	}
	r, err := packet.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var m dns.Msg
	if err := m.Unpack(r.Payload); err != nil {
		t.Fatal(err)
	}
	if m.Rcode == dns.RcodeServerFailure && m.Authoritative {
		t.Errorf("%s: SERVFAIL with AA", name)
	}
	return summarize(&m)
}

// fallbackPath asks the fallback; the client's address is carried in ECS,
// the way a resolver in front of it would.
func (w *policyWorld) fallbackPath(t *testing.T, name, client string, ecs bool) (outcome, *dns.EDNS0_SUBNET) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	if ecs {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.ParseIP(client).To4()})
	}
	r, err := dns.Exchange(m, w.addr)
	if err != nil {
		t.Fatal(err)
	}
	var sub *dns.EDNS0_SUBNET
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				sub = s
			}
		}
	}
	return summarize(r), sub
}

func allowed(c policyCase, o outcome) bool {
	if o.rcode != c.rcode || o.nodata != c.nodata || (c.ttl != 0 && o.ttl != c.ttl) {
		return false
	}
	for _, a := range c.allowed {
		if slices.Equal(a, o.answer) {
			return true
		}
	}
	return false
}

// TestPolicies runs every case on both paths: XDP through BPF_PROG_RUN and
// the fallback over UDP. Both must give only allowed answers, in their
// order, and over 64 queries every allowed answer shows up on each path.
// The selection's rules, draw by draw, are tested in controlplane/selection;
// this is the config, the maps and both replies carrying them out.
func TestPolicies(t *testing.T) {
	w := newPolicyWorld(t)
	for i, c := range policyCases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("p%d.example.test.", i)
			client := c.client
			if client == "" {
				client = "198.18.0.1"
			}
			seenX, seenF := map[string]bool{}, map[string]bool{}
			for range 64 {
				ox := w.xdp(t, name, client)
				if !allowed(c, ox) {
					t.Fatalf("xdp: %+v, allowed %v rcode %d nodata %v ttl %d", ox, c.allowed, c.rcode, c.nodata, c.ttl)
				}
				seenX[strings.Join(ox.answer, ",")] = true
				of, sub := w.fallbackPath(t, name, client, strings.HasPrefix(c.name, "geo"))
				if !allowed(c, of) {
					t.Fatalf("fallback: %+v, allowed %v rcode %d nodata %v ttl %d", of, c.allowed, c.rcode, c.nodata, c.ttl)
				}
				seenF[strings.Join(of.answer, ",")] = true
				if strings.HasPrefix(c.name, "geo") {
					want := uint8(25)
					if c.client == "198.18.9.9" {
						want = 32 // no prefix decided: the source prefix
					}
					if sub == nil || sub.SourceScope != want {
						t.Fatalf("fallback ECS reply %+v, want scope %d", sub, want)
					}
				}
			}
			for _, a := range c.allowed {
				k := strings.Join(a, ",")
				if !seenX[k] || !seenF[k] {
					t.Errorf("answer %v never given (xdp %v, fallback %v) in 64 queries", a, seenX[k], seenF[k])
				}
			}
		})
	}
}

// TestGeoECSPassed: XDP leaves a geo record queried with ECS to the
// fallback, which steers by the subnet; without geo, ECS is ignored.
func TestGeoECSPassed(t *testing.T) {
	w := newPolicyWorld(t)
	ecs := func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.18.0.0").To4()})
	}
	geoIdx := slices.IndexFunc(policyCases, func(c policyCase) bool { return c.name == "geo own region" })
	in := packet.Build(frame(false, query(fmt.Sprintf("p%d.example.test.", geoIdx), dns.TypeA, ecs), packet.Full))
	if ret, out := run(t, w.objs, in); ret != 2 || !slices.Equal(out, in) {
		t.Errorf("geo record with ECS: action %d, want XDP_PASS untouched", ret)
	}
	in = packet.Build(frame(false, query("p0.example.test.", dns.TypeA, ecs), packet.Full))
	if ret, _ := run(t, w.objs, in); ret != 3 {
		t.Errorf("non-geo record with ECS: action %d, want XDP_TX", ret)
	}
}
