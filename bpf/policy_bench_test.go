package bpf_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
)

// BenchmarkPolicyCost measures what a query costs the XDP program for each
// policy with 0%, 50% and 100% of its K candidates down, as the kernel
// times it: BPF_PROG_RUN, one run per call on a fresh copy of the query
// (the kernel reuses its buffer between repeats, so a repeat count would
// time the program on its own reply). The same call's cost for an
// XDP_PASS program is subtracted. Rounds interleave the cells so that a
// slow stretch of the machine hits all of them. Within a policy the three
// levels should agree within 5%: the scan does the same work whatever the
// health.
//
//	go test ./bpf -run '^$' -bench PolicyCost -benchtime 1x
func BenchmarkPolicyCost(b *testing.B) {
	o := load(b)
	pass := passProgram(b)

	policies := []bpf.SteadydnsPolicy{bpf.SteadydnsPolicyPOLICY_MULTIVALUE, bpf.SteadydnsPolicyPOLICY_FAILOVER, bpf.SteadydnsPolicyPOLICY_WEIGHTED, bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN}
	downs := []int{0, 50, 100}
	k := len(bpf.SteadydnsRrset{}.Cand)
	frames := map[string][]byte{}
	for _, p := range policies {
		for _, down := range downs {
			var cs []cand
			for j := range k {
				// Checks 1..K are up; K+1..2K are down. 50% down puts
				// every other candidate on a down check.
				check := uint32(1 + j)
				if down == 100 || down == 50 && j%2 == 1 {
					check += uint32(k)
				}
				cs = append(cs, cand{addr: fmt.Sprintf("198.18.8.%d", j+1), check: check, prio: uint8(j % 2), weight: uint8(10 * (j + 1))})
			}
			v := rrset(60, 4, cs...)
			v.Policy = uint8(p)
			name := fmt.Sprintf("p%d-d%d.example.test.", p, down)
			put(b, o, name, dns.TypeA, v)
			frames[name] = packet.Build(frame(false, query(name, dns.TypeA, nil), packet.Full))
		}
	}
	var up []uint32
	for j := range k {
		up = append(up, uint32(1+j))
	}
	setHealth(b, o, up...)

	names := slices.Sorted(maps.Keys(frames))
	cells := make([]costCell, len(names))
	for i, n := range names {
		cells[i] = costCell{n, o.Steadydns, frames[n]}
	}
	med := medianCosts(b, pass, frames[names[0]], cells)
	median := func(name string) float64 { return med[slices.Index(names, name)] }
	for _, p := range policies {
		var lo, hi float64
		for i, down := range downs {
			m := median(fmt.Sprintf("p%d-d%d.example.test.", p, down))
			b.ReportMetric(m, fmt.Sprintf("ns/%s-%d%%down", policyName(p), down))
			if i == 0 || m < lo {
				lo = m
			}
			if m > hi {
				hi = m
			}
		}
		b.ReportMetric(100*(hi-lo)/lo, fmt.Sprintf("spread%%/%s", policyName(p)))
	}
}

func policyName(p bpf.SteadydnsPolicy) string {
	return map[bpf.SteadydnsPolicy]string{
		bpf.SteadydnsPolicyPOLICY_MULTIVALUE: "multivalue", bpf.SteadydnsPolicyPOLICY_FAILOVER: "failover",
		bpf.SteadydnsPolicyPOLICY_WEIGHTED: "weighted", bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN: "round_robin",
	}[p]
}

// The BPF_PROG_RUN cost method the benchmarks share: rounds of perRound
// runs, each on a fresh copy of the frame, the cells interleaved.
const perRound, rounds = 2000, 15

// costCell is a cell of a cost benchmark: prog run on in, answering with
// XDP_TX.
type costCell struct {
	name string
	prog *ebpf.Program
	in   []byte
}

// medianCosts times cells by the shared method, b.N times rounds of every
// cell in turn, each less the XDP_PASS program's cost on base, and
// returns each cell's median in ns, in the cells' order.
func medianCosts(b *testing.B, pass *ebpf.Program, base []byte, cells []costCell) []float64 {
	samples := make([][]float64, len(cells))
	for range b.N {
		for range rounds {
			floor := runCost(b, pass, base, 2)
			for i, c := range cells {
				samples[i] = append(samples[i], float64(runCost(b, c.prog, c.in, 3)-floor))
			}
		}
	}
	med := make([]float64, len(cells))
	for i, s := range samples {
		s = slices.Sorted(slices.Values(s))
		med[i] = s[len(s)/2]
	}
	return med
}

// runCost is prog's mean time per run on in over perRound runs; every run
// must return want.
func runCost(b *testing.B, prog *ebpf.Program, in []byte, want uint32) time.Duration {
	return rotateCost(b, prog, [][]byte{in}, want)
}

// rotateCost is runCost over a list of frames: prog's mean time per run
// over perRound runs, run i on frame i mod len(in); every run must return
// want.
func rotateCost(b *testing.B, prog *ebpf.Program, in [][]byte, want uint32) time.Duration {
	var total time.Duration
	for i := range perRound {
		ret, d, err := prog.Benchmark(in[i%len(in)], 1, nil)
		if err != nil || ret != want {
			b.Fatalf("action %d, %v", ret, err)
		}
		total += d
	}
	return total / perRound
}

// passProgram is an XDP_PASS program, whose cost for the same calls the
// benchmarks subtract: the loop's and the system call's share. It also
// pins the benchmark to CPU 1, where every cell then runs.
func passProgram(b *testing.B) *ebpf.Program {
	pinCPU(b, 1)
	var pass bpf.PassObjects
	if err := bpf.LoadPassObjects(&pass, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pass.Close() })
	return pass.XdpPass
}
