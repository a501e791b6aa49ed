package bpf_test

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// BenchmarkSampleCost measures what dnstap's sampling costs an answered
// A query, timed as BenchmarkPolicyCost times (BPF_PROG_RUN, one run per
// call, the XDP_PASS program's cost subtracted, rounds interleaving the
// cells): sampling off, one in 100, and one in 1, with a reader draining
// the ring meanwhile, as the daemon does.
//
//	go test ./bpf -run '^$' -bench SampleCost -benchtime 1x
func BenchmarkSampleCost(b *testing.B) {
	pass := passProgram(b)
	cells := []struct {
		name  string
		every uint32
		prog  *ebpf.Program
	}{{"off", 0, nil}, {"1in100", 100, nil}, {"1in1", 1, nil}}
	in := packet.Build(frame(false, query("www.example.test.", dns.TypeA, nil), packet.Full))
	for i := range cells {
		o := loadWith(b, loader.Options{SampleEvery: cells[i].every})
		put(b, o, "www.example.test.", dns.TypeA, rrset(30, 8, cand{addr: "198.18.1.1", check: 1}, cand{addr: "198.18.1.2", check: 2}, cand{addr: "198.18.1.3", check: 3}))
		setHealth(b, o, 1, 2, 3)
		cells[i].prog = o.Steadydns
		r, err := o.ReadSamples()
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				if _, err := r.Read(); errors.Is(err, loader.ErrSamplesEnd) {
					return
				}
			}
		}()
		b.Cleanup(func() { r.Close(); <-done })
	}
	timed := make([]costCell, len(cells))
	for i, c := range cells {
		timed[i] = costCell{c.name, c.prog, in}
	}
	for i, m := range medianCosts(b, pass, in, timed) {
		b.ReportMetric(m, "ns/"+cells[i].name)
	}
}
