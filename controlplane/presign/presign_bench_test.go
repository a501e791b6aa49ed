package presign

import (
	"fmt"
	"testing"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/dnssec"
)

// BenchmarkSignPerFlip measures what one health change costs the
// presigner: a candidate of a set of 8 goes down or comes back, and Sync
// signs every answer set the selection can then produce, with the real
// signer (ECDSA P-256 and Ed25519). Cold: the signer's cache is empty, as
// for sets no health seen before produced; warm: both healths were
// signed before, so a flip signs nothing anew. It reports the answer
// sets one flip wants signed (sets/flip) and the time per flip.
//
//	go test ./controlplane/presign -run '^$' -bench SignPerFlip -benchtime 200x
func BenchmarkSignPerFlip(b *testing.B) {
	const n = 8
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("198.18.2.%d", i+1)
	}
	policies := []struct {
		name   string
		policy bpf.SteadydnsPolicy
		max    uint8
	}{
		{"multivalue4", bpf.SteadydnsPolicyPOLICY_MULTIVALUE, 4},
		{"failover", bpf.SteadydnsPolicyPOLICY_FAILOVER, 1},
		{"weighted", bpf.SteadydnsPolicyPOLICY_WEIGHTED, 1},
	}
	for _, algName := range []string{"ecdsap256sha256", "ed25519"} {
		alg, _ := dnssec.Algorithm(algName)
		keys, err := dnssec.Ensure(b.TempDir(), "example.test.", alg, false, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		for _, pol := range policies {
			for _, warm := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/cold", algName, pol.name)
				if warm {
					name = fmt.Sprintf("%s/%s/warm", algName, pol.name)
				}
				b.Run(name, func(b *testing.B) {
					s := set(pol.policy, pol.max, addrs...)
					for i := range n {
						// Failover: two levels of four.
						s.Value.Cand[i].Priority = uint8(i / 4)
					}
					h := make(health, n+1)
					for i := range h {
						h[i] = true
					}
					st := &mapStore{m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}}
					p, err := New(st, &h, time.Now())
					if err != nil {
						b.Fatal(err)
					}
					newSigner := func() {
						sg, err := dnssec.NewSigner("example.test.", keys, time.Now)
						if err != nil {
							b.Fatal(err)
						}
						s.Zone = sg
						p.Configure([]Set{s}, nil)
					}
					newSigner()
					sync := func() Stats {
						st, err := p.Sync(time.Now())
						if err != nil {
							b.Fatal(err)
						}
						return st
					}
					sync()
					// Warm: both healths signed once before the clock runs.
					h[1] = false
					sync()
					h[1] = true
					sync()
					signed := 0
					b.ResetTimer()
					for i := range b.N {
						if !warm {
							b.StopTimer()
							newSigner()
							b.StartTimer()
						}
						h[1] = i%2 == 1
						signed += sync().Outcomes
					}
					b.ReportMetric(float64(signed)/float64(b.N), "sets/flip")
				})
			}
		}
	}
}
