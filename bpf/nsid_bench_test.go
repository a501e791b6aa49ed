package bpf_test

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// BenchmarkNSIDCost measures what NSID costs a query, timed as
// BenchmarkPolicyCost times (BPF_PROG_RUN, one run per call, the XDP_PASS
// program's cost subtracted, rounds interleaving the cells): an A query
// with OPT, with and without an NSID option, to a program with NSID unset
// and one with a 10-byte value.
//
//	go test ./bpf -run '^$' -bench NSIDCost -benchtime 1x
func BenchmarkNSIDCost(b *testing.B) {
	off := load(b)
	on := loadWith(b, loader.Options{NSID: []byte("edge-ams-1")})
	pass := passProgram(b)
	for _, o := range []*loader.Objects{off, on} {
		put(b, o, "www.example.test.", dns.TypeA, rrset(30, 8, cand{addr: "198.18.1.1", check: 1}, cand{addr: "198.18.1.2", check: 2}, cand{addr: "198.18.1.3", check: 3}))
		setHealth(b, o, 1, 2, 3)
	}
	plain := packet.Build(frame(false, query("www.example.test.", dns.TypeA, withOpt(1232, false)), packet.Full))
	asked := packet.Build(frame(false, query("www.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})), packet.Full))
	cells := []costCell{
		{"unset-not-asked", off.Steadydns, plain},
		{"unset-asked", off.Steadydns, asked},
		{"set-not-asked", on.Steadydns, plain},
		{"set-asked", on.Steadydns, asked},
	}
	for i, m := range medianCosts(b, pass, plain, cells) {
		b.ReportMetric(m, "ns/"+cells[i].name)
	}
}
