package bpf_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

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
// answering. Every round loads each cell's program anew (loadAgain), so
// that the medians are over placements of the JIT image, not one each.
//
//	go test ./bpf -run '^$' -bench RRLCost -benchtime 1x
func BenchmarkRRLCost(b *testing.B) {
	underRRL := loader.RRL{Rate: 1000000, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}
	overRRL := loader.RRL{Rate: 1, Slip: 0, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}
	off, under, over := load(b), loadRRL(b, underRRL), loadRRL(b, overRRL)
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

	// Each cell's accounts are its own: a client over its limit in one
	// is not in another.
	cells := []struct {
		name string
		o    *loader.Objects
		rrl  loader.RRL
		want uint32
	}{{"off", off, loader.RRL{}, 3}, {"on", under, underRRL, 3}, {"limited", over, overRRL, 1}}
	samples := map[string][]float64{}
	for range b.N {
		for range rounds {
			base := float64(runCost(b, pass, in, 2))
			for _, c := range cells {
				p := loadAgain(b, c.o, c.rrl)
				samples[c.name] = append(samples[c.name], float64(runCost(b, p, in, c.want))-base)
				p.Close()
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

// BenchmarkRRLRotatingCost measures what rate limiting adds when
// consecutive queries ask for different names, as under load: 1,000 names
// of K candidates, each its own key, so each query charges an account in
// another set of the table, a cache line (and often a page) the query
// before did not touch. The cells are the program without RRL, with it
// at the default table size (65,536 accounts, 1 MiB) and with the
// smallest table that still holds the 1,000 keys four times over (16,384
// accounts, 256 KiB), the client far under its limit in both. Method as
// BenchmarkRotatingCost; the rise is per round (the round's "on" over the
// same round's "off"), then the median of the rounds; every round loads
// each cell's program anew (loadAgain).
//
//	go test ./bpf -run '^$' -bench RRLRotatingCost -benchtime 1x
func BenchmarkRRLRotatingCost(b *testing.B) {
	under := loader.RRL{Rate: 1000000, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}
	small := under
	small.TableSize = 16384
	cells := []struct {
		name string
		o    *loader.Objects
		rrl  loader.RRL
	}{{"off", load(b), loader.RRL{}}, {"on", loadRRL(b, under), under}, {"on-256KiB", loadRRL(b, small), small}}
	pass := passProgram(b)

	const names, k = 1000, 8
	var cs []cand
	for j := range k {
		cs = append(cs, cand{addr: fmt.Sprintf("198.18.9.%d", j+1), check: uint32(1 + j)})
	}
	var frames [][]byte
	for i := range names {
		name := fmt.Sprintf("r%04d.example.test.", i)
		for _, c := range cells {
			put(b, c.o, name, dns.TypeA, rrset(60, 4, cs...))
		}
		frames = append(frames, packet.Build(frame(false, query(name, dns.TypeA, nil), packet.Full)))
	}
	for _, c := range cells {
		setHealth(b, c.o, 1, 2, 3, 4, 5, 6, 7, 8)
	}

	ns, rise := map[string][]float64{}, map[string][]float64{}
	for range b.N {
		for round := range rounds {
			base := float64(rotateCost(b, pass, frames, 2))
			got := map[string]float64{}
			// Every second round in reverse, so that a drift over two
			// rounds falls on every cell alike.
			for j := range cells {
				c := cells[j]
				if round%2 == 1 {
					c = cells[len(cells)-1-j]
				}
				p := loadAgain(b, c.o, c.rrl)
				got[c.name] = float64(rotateCost(b, p, frames, 3)) - base
				p.Close()
				ns[c.name] = append(ns[c.name], got[c.name])
			}
			for _, c := range cells[1:] {
				rise[c.name] = append(rise[c.name], 100*(got[c.name]-got["off"])/got["off"])
			}
		}
	}
	median := func(s []float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, c := range cells {
		b.ReportMetric(median(ns[c.name]), "ns/"+c.name)
	}
	for _, c := range cells[1:] {
		b.ReportMetric(median(rise[c.name]), "rise%/"+c.name)
	}
}
