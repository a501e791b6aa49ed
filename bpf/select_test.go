package bpf_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/geo"
	"github.com/steadydns/steadydns/controlplane/selection"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// answers queries name over XDP and returns the answered addresses in
// order, or nil when the query was passed.
func answers(t *testing.T, o *loader.Objects, name string) []string {
	t.Helper()
	ret, out := run(t, o, packet.Build(frame(false, query(name, dns.TypeA, nil), packet.Full)))
	if ret != 3 {
		return nil
	}
	r, err := packet.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var m dns.Msg
	if err := m.Unpack(r.Payload); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, rr := range m.Answer {
		got = append(got, rr.(*dns.A).A.String())
	}
	return got
}

func fullSet(n int) (*bpf.SteadydnsRrset, []string) {
	var cs []cand
	var addrs []string
	for i := range n {
		a := fmt.Sprintf("198.18.3.%d", i+1)
		cs = append(cs, cand{addr: a, check: uint32(10 + i)})
		addrs = append(addrs, a)
	}
	return rrset(60, 8, cs...), addrs
}

// TestSelectionByHealth: a set of K candidates with 0, 1, K-1 and K healthy.
func TestSelectionByHealth(t *testing.T) {
	o := load(t)
	k := loader.MaxCandidates
	v, addrs := fullSet(k)
	put(t, o, "pool.example.test.", dns.TypeA, v)
	checks := func(idx ...int) []uint32 {
		var out []uint32
		for _, i := range idx {
			out = append(out, uint32(10+i))
		}
		return out
	}
	all := make([]int, k)
	for i := range all {
		all[i] = i
	}
	cases := []struct {
		name string
		up   []int
		want []int
	}{
		{"none healthy fails open", nil, all},
		{"one healthy", []int{5}, []int{5}},
		{"K-1 healthy", all[1:], all[1:]},
		{"K healthy", all, all},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setHealth(t, o, checks(c.up...)...)
			var want []string
			for _, i := range c.want {
				want = append(want, addrs[i])
			}
			for range 20 {
				if got := answers(t, o, "pool.example.test."); !slices.Equal(got, want) {
					t.Fatalf("answers %v, want %v", got, want)
				}
			}
		})
	}
}

// TestMaxAnswers: more healthy candidates than max_answers gives exactly
// max_answers of them, consecutive in slot order from a random start, and
// over many queries every healthy candidate is answered.
func TestMaxAnswers(t *testing.T) {
	o := load(t)
	k := loader.MaxCandidates
	v, addrs := fullSet(k)
	v.MaxAnswers = 3
	put(t, o, "pool.example.test.", dns.TypeA, v)
	setHealth(t, o, 10, 11, 12, 13, 14, 15, 16) // all but the last
	healthy := addrs[:k-1]
	seen := map[string]int{}
	for range 2000 {
		got := answers(t, o, "pool.example.test.")
		if len(got) != 3 {
			t.Fatalf("%d answers %v, want 3", len(got), got)
		}
		first := slices.Index(healthy, got[0])
		if first < 0 {
			t.Fatalf("answer %v includes an unhealthy candidate", got)
		}
		for i, a := range got {
			if want := healthy[(first+i)%len(healthy)]; a != want {
				t.Fatalf("answers %v are not consecutive healthy slots", got)
			}
			seen[a]++
		}
	}
	// Each healthy candidate is in 3/7 of the answers: 857 of 2000
	// expected; a broken draw that skips any of them fails this.
	for _, a := range healthy {
		if seen[a] < 700 || seen[a] > 1020 {
			t.Errorf("candidate %s answered %d times in 2000, want 857±150", a, seen[a])
		}
	}
}

// TestColdAndStale: with no table every candidate is answered; with a
// stale table, stale_policy answer_all answers all, keep keeps the table.
func TestColdAndStale(t *testing.T) {
	o := load(t)
	v, addrs := fullSet(4)
	put(t, o, "keep.example.test.", dns.TypeA, v)
	open := *v
	open.Stale = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL)
	put(t, o, "open.example.test.", dns.TypeA, &open)

	if got := answers(t, o, "keep.example.test."); !slices.Equal(got, addrs) {
		t.Errorf("cold start: %v, want all %v", got, addrs)
	}
	table := make([]byte, loader.HealthTableBytes(o.HealthCapacity()))
	loader.PutHealthEntry(table, 0, true, 0)
	loader.PutHealthEntry(table, 11, true, 0)
	// Fresh table: only candidate 1 is up, on both records.
	if err := o.WriteHealth(table, 7, 0, uint64(3600e9)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep.example.test.", "open.example.test."} {
		if got := answers(t, o, name); !slices.Equal(got, addrs[1:2]) {
			t.Errorf("fresh table, %s: %v, want %v", name, got, addrs[1:2])
		}
	}
	// Stale after 1ns.
	if err := o.WriteHealth(table, 8, 0, 1); err != nil {
		t.Fatal(err)
	}
	if got := answers(t, o, "keep.example.test."); !slices.Equal(got, addrs[1:2]) {
		t.Errorf("stale table, keep: %v, want %v", got, addrs[1:2])
	}
	if got := answers(t, o, "open.example.test."); !slices.Equal(got, addrs) {
		t.Errorf("stale table, answer_all: %v, want %v", got, addrs)
	}
}

// TestDifferential: random record sets (every policy, weights, priorities,
// backups, regions, when_all_down) and health tables, queried from clients
// in two regions and none, get from XDP an answer that the Go selection,
// the fallback's, can also give.
func TestDifferential(t *testing.T) {
	o := load(t)
	g := geo.New(&config.Geo{Regions: []config.Region{
		{Name: "eu", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/25")}, Next: []string{"us"}},
		{Name: "us", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.128/25")}},
	}})
	v4, v6 := g.Entries()
	if err := o.SyncGeo(v4, v6, g.Orders()); err != nil {
		t.Fatal(err)
	}
	var soa bpf.SteadydnsZoneSoa
	soa.Rdlen, soa.ApexLen, soa.Ttl = 22, 1, 60 // "." SOA: two root names and 5 numbers
	if err := o.PutZoneSOA(0, &soa); err != nil {
		t.Fatal(err)
	}
	clients := []struct {
		addr   string
		region uint8
	}{{"198.18.0.1", 1}, {"198.18.0.200", 2}, {"198.18.9.1", 0}}
	rng := rand.New(rand.NewPCG(1, 2))
	k := loader.MaxCandidates
	for trial := range 400 {
		n := 1 + rng.IntN(k)
		var cs []cand
		for i := range n {
			w := uint8(rng.IntN(256))
			if rng.IntN(4) == 0 {
				w = 0
			}
			cs = append(cs, cand{addr: fmt.Sprintf("198.18.4.%d", i+1), check: uint32(1 + rng.IntN(12)), backup: rng.IntN(4) == 0, prio: uint8(rng.IntN(3)), weight: w})
		}
		cs[rng.IntN(n)].backup = false // config requires a primary
		v := rrset(60, uint8(1+rng.IntN(k)), cs...)
		v.Policy = uint8(rng.IntN(4))
		v.WhenAllDown = uint8(rng.IntN(3))
		v.MinHealthy = uint8(rng.IntN(3))
		if rng.IntN(2) == 0 {
			v.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_GEO)
			for i := range n {
				v.Cand[i].Region = uint8(rng.IntN(3))
			}
		}
		name := fmt.Sprintf("d%d.example.test.", trial)
		put(t, o, name, dns.TypeA, v)
		var up []uint32
		upSet := map[uint32]bool{0: true}
		for i := uint32(1); i <= 12; i++ {
			if rng.IntN(2) == 0 {
				up = append(up, i)
				upSet[i] = true
			}
		}
		setHealth(t, o, up...)

		c := clients[trial%len(clients)]
		var ranks selection.Ranks
		if v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_GEO) != 0 {
			ranks = g.Ranks(c.region)
		}
		possible := map[string]bool{}
		for x := range uint32(8 * 256) {
			p := selection.Select(v, func(c uint32) bool { return upSet[c] }, ranks, false, x, x)
			possible[pickString(v, p)] = true
		}
		for range 5 {
			got := xdpOutcome(t, o, name, c.addr)
			if !possible[got] {
				keys := make([]string, 0, len(possible))
				for p := range possible {
					keys = append(keys, p)
				}
				sort.Strings(keys)
				t.Fatalf("trial %d from %s: xdp answered %q, go selection allows %q\nset %+v up %v", trial, c.addr, got, keys, v, up)
			}
		}
	}
}

func pickString(v *bpf.SteadydnsRrset, p selection.Pick) string {
	switch p.Action {
	case selection.NoData:
		return "nodata"
	case selection.ServFail:
		return "servfail"
	}
	var as []string
	for _, j := range p.Order {
		as = append(as, addrString(v, j))
	}
	return strings.Join(as, ",")
}

func xdpOutcome(t *testing.T, o *loader.Objects, name, client string) string {
	f := frame(false, query(name, dns.TypeA, nil), packet.Full)
	f.Src = netip.AddrPortFrom(netip.MustParseAddr(client), 40000)
	ret, out := run(t, o, packet.Build(f))
	if ret != 3 {
		return fmt.Sprintf("passed(%d)", ret)
	}
	r, err := packet.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var m dns.Msg
	if err := m.Unpack(r.Payload); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Rcode == dns.RcodeServerFailure:
		return "servfail"
	case len(m.Answer) == 0 && len(m.Ns) == 1:
		return "nodata"
	}
	var as []string
	for _, rr := range m.Answer {
		as = append(as, rr.(*dns.A).A.String())
	}
	return strings.Join(as, ",")
}

func addrString(v *bpf.SteadydnsRrset, j int) string {
	return netip.AddrFrom4([4]byte(v.Cand[j].Addr[:4])).String()
}
