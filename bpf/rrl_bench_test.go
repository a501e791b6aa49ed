package bpf_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// BenchmarkRRLCost measures what rate limiting adds to a query, as
// BenchmarkPolicyCost does (BPF_PROG_RUN, one run per call on a fresh copy
// of the query, less an XDP_PASS program's cost for the same call, rounds
// interleaving the cells): the program loaded without RRL, with RRL and
// the client far under its limit, and with RRL and the client over it
// (slip 0, so every reply is dropped), against the same program
// answering.
//
//	go test ./bpf -run '^$' -bench RRLCost -benchtime 1x
func BenchmarkRRLCost(b *testing.B) {
	off := load(b)
	under := loadRRL(b, loader.RRL{Rate: 1000000, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56})
	over := loadRRL(b, loader.RRL{Rate: 1, Slip: 0, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56})
	pass := passProgram(b)
	var cs []cand
	for j := range 8 {
		cs = append(cs, cand{addr: "198.18.8." + string(rune('1'+j)), check: uint32(1 + j)})
	}
	for _, o := range []*loader.Objects{off, under, over} {
		put(b, o, "www.example.test.", dns.TypeA, rrset(60, 4, cs...))
		setHealth(b, o, 1, 2, 3, 4, 5, 6, 7, 8)
	}
	in := packet.Build(frame(false, query("www.example.test.", dns.TypeA, nil), packet.Full))

	// Over the limit from the third reply on; every call after keeps it
	// there.
	for range 3 {
		if _, _, err := over.Steadydns.Benchmark(in, 1, nil); err != nil {
			b.Fatal(err)
		}
	}

	cells := []struct {
		name string
		prog *ebpf.Program
		want uint32
	}{{"off", off.Steadydns, 3}, {"on", under.Steadydns, 3}, {"limited", over.Steadydns, 1}}
	samples := map[string][]float64{}
	for range b.N {
		for range rounds {
			base := float64(runCost(b, pass, in, 2))
			for _, c := range cells {
				samples[c.name] = append(samples[c.name], float64(runCost(b, c.prog, in, c.want))-base)
			}
		}
	}
	median := func(s []float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return s[len(s)/2]
	}
	m := map[string]float64{}
	for _, c := range cells {
		m[c.name] = median(samples[c.name])
		b.ReportMetric(m[c.name], "ns/"+c.name)
	}
	b.ReportMetric(100*(m["on"]-m["off"])/m["off"], "rise%")
	b.ReportMetric(m["limited"]/m["on"], "limited/answered")
}
