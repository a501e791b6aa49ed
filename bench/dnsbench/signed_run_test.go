package dnsbench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/steadydns/steadydns/bench/dnsbench"
)

// TestSignedRun measures steadydns with its zone signed online under DO=1
// load: the run starts only once XDP answers every name signed, and each
// spot-checked answer must carry its RRSIG; the paired DO=0 run is
// measured on the same process. It asserts no speed.
func TestSignedRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the benchmark loads XDP programs and builds network namespaces, so it needs root (running as uid %d)", os.Geteuid())
	}
	o := dnsbench.Quick()
	o.Duration = time.Second
	o.Servers = []string{"steadydns-signed"}
	o.ConstantWorkSizes = nil
	o.PushRounds = 0
	o.Prefix = ""
	o.Log = logWriter{t}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Binary = exe
	res, err := dnsbench.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Servers) != 1 {
		t.Fatalf("measured %d servers, want steadydns-signed", len(res.Servers))
	}
	s := res.Servers[0]
	if s.Spot.Checked != 40 || s.Spot.Correct != s.Spot.Checked {
		t.Errorf("%d of %d answers right and signed; first wrong: %s", s.Spot.Correct, s.Spot.Checked, s.Spot.Problem)
	}
	for _, r := range s.Compliance {
		if !r.OK() {
			t.Errorf("%s", r)
		}
	}
	if s.Rcodes["NOERROR"] == 0 || len(s.Rcodes) != 1 {
		t.Errorf("kxdpgun's replies by rcode %v, want NOERROR only", s.Rcodes)
	}
	if s.KernelNs.N != 1 || s.KernelNs.Median <= 0 || s.Answered.Median <= 0 {
		t.Errorf("in-kernel cost %+v, answered %+v", s.KernelNs, s.Answered)
	}
	if s.DO0Ns.N != 1 || s.DO0Ns.Median <= 0 || s.DO0Answered.Median <= 0 {
		t.Errorf("the paired DO=0 run: in-kernel cost %+v, answered %+v", s.DO0Ns, s.DO0Answered)
	}
	if want := s.KernelNs.Median / s.DO0Ns.Median; s.DO1OverDO0.N != 1 || s.DO1OverDO0.Median != want {
		t.Errorf("DO=1 over DO=0 %+v, want %v", s.DO1OverDO0, want)
	}
}
