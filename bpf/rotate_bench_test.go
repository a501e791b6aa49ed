package bpf_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
)

// BenchmarkRotatingCost measures what a query costs the XDP program when
// consecutive queries ask for different names, as a zone's traffic does:
// 1,000 names with one candidate and 1,000 with K, so 2,000 sets fill the
// live region of 4,096 slots as the 1,000-name zone of the load benchmark
// does, and each run takes the next name's frame. The one-name cells
// repeat a single frame, whose slot stays in the closest caches: the gap
// between the two is what the record table's cache misses cost. Method as
// BenchmarkPolicyCost (BPF_PROG_RUN, one run per call, less an XDP_PASS
// program's cost for the same calls, rounds interleaving the cells).
//
//	go test ./bpf -run '^$' -bench RotatingCost -benchtime 1x
func BenchmarkRotatingCost(b *testing.B) {
	o := load(b)
	pass := passProgram(b)

	const names = 1000
	k := len(bpf.SteadydnsRrset{}.Cand)
	cells := []int{1, k}
	frames := map[int][][]byte{}
	for _, n := range cells {
		var cs []cand
		for j := range n {
			cs = append(cs, cand{addr: fmt.Sprintf("198.18.9.%d", j+1), check: uint32(1 + j)})
		}
		for i := range names {
			name := fmt.Sprintf("r%04d-k%d.example.test.", i, n)
			put(b, o, name, dns.TypeA, rrset(60, uint8(n), cs...))
			frames[n] = append(frames[n], packet.Build(frame(false, query(name, dns.TypeA, nil), packet.Full)))
		}
	}
	var up []uint32
	for j := range k {
		up = append(up, uint32(1+j))
	}
	setHealth(b, o, up...)

	rotating, hot := map[int][]float64{}, map[int][]float64{}
	for range b.N {
		for range rounds {
			base := rotateCost(b, pass, frames[1], 2)
			for _, n := range cells {
				rotating[n] = append(rotating[n], float64(rotateCost(b, o.Steadydns, frames[n], 3)-base))
				hot[n] = append(hot[n], float64(rotateCost(b, o.Steadydns, frames[n][:1], 3)-base))
			}
		}
	}
	median := func(s []float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, n := range cells {
		b.ReportMetric(median(rotating[n]), fmt.Sprintf("ns/%dnames-%dcand", names, n))
		b.ReportMetric(median(hot[n]), fmt.Sprintf("ns/1name-%dcand", n))
	}
}
