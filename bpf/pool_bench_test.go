package bpf_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// BenchmarkPoolCost measures what a query costs the XDP program for a
// multivalue set of K = 8 candidates, in its slot, and of 16 and 64, in
// the pool map, with 0%, 50% and 100% of them down, side by side in one
// run by BenchmarkPolicyCost's method: a set visits every candidate, so
// the cost grows with K and not with health.
//
//	go test ./bpf -run '^$' -bench PoolCost -benchtime 1x
func BenchmarkPoolCost(b *testing.B) {
	o := load(b)
	pass := passProgram(b)
	ks, downs := []int{8, 16, 64}, []int{0, 50, 100}
	const up = 1 // every candidate's check is up or down, entry 1 or 2
	frames := map[string][]byte{}
	for _, k := range ks {
		for _, down := range downs {
			v := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, N: uint8(k), MaxAnswers: 8}}
			if k > loader.MaxCandidates {
				v.Pool = make([]bpf.SteadydnsCandidate, k)
			}
			cs := v.Candidates()
			for j := range cs {
				a := netip.AddrFrom4([4]byte{198, 18, 9, byte(j + 1)}).As4()
				copy(cs[j].Addr[:], a[:])
				cs[j].Check = up
				if down == 100 || down == 50 && j%2 == 1 {
					cs[j].Check = up + 1
				}
			}
			name := fmt.Sprintf("k%d-d%d.example.test.", k, down)
			if err := o.PutSet(loader.RecordKey{Wire: wire(b, name), Qtype: dns.TypeA}, v); err != nil {
				b.Fatal(err)
			}
			frames[name] = packet.Build(frame(false, query(name, dns.TypeA, nil), packet.Full))
		}
	}
	setHealth(b, o, up)

	names := slices.Sorted(maps.Keys(frames))
	cells := make([]costCell, len(names))
	for i, n := range names {
		cells[i] = costCell{n, o.Steadydns, frames[n]}
	}
	med := medianCosts(b, pass, frames[names[0]], cells)
	for _, k := range ks {
		for _, down := range downs {
			m := med[slices.Index(names, fmt.Sprintf("k%d-d%d.example.test.", k, down))]
			b.ReportMetric(m, fmt.Sprintf("ns/K%d-%d%%down", k, down))
		}
	}
}
