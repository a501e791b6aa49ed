package dnsbench_test

import (
	"context"
	"os"
	"testing"

	"github.com/steadydns/steadydns/bench/dnsbench"
	"github.com/steadydns/steadydns/testenv"
)

// TestMeasureLoad runs the loading measurement on a small zone with this
// test binary as serve, and checks that every figure comes from a real
// process that answered every set right, before and after the reload,
// and lost no query meanwhile. It asserts no speed.
func TestMeasureLoad(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const names = 10_000
	res, err := dnsbench.MeasureLoad(context.Background(), dnsbench.LoadOptions{Names: names, Rate: 1000, Binary: exe, Log: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Sets != 2*names+2 || res.Changed != names/50 {
		t.Errorf("sets %d, changed %d; want %d, %d", res.Sets, res.Changed, 2*names+2, names/50)
	}
	for _, ph := range []struct {
		name string
		dnsbench.Phase
	}{{"load", res.Load}, {"reload", res.Reload}} {
		if ph.Checked != 2*names || ph.Correct != ph.Checked {
			t.Errorf("%s: %d of %d sets answered right, want all %d; first problem: %s", ph.name, ph.Correct, ph.Checked, 2*names, ph.Problem)
		}
		if ph.Seconds <= 0 || ph.CPU <= 0 || ph.GCs == 0 || ph.HeapPeak == 0 {
			t.Errorf("%s: %v s, %v s of CPU, %d GCs, heap peak %d: a figure without a source", ph.name, ph.Seconds, ph.CPU, ph.GCs, ph.HeapPeak)
		}
		// The record table is mapped and touched, and the process holds
		// more than it.
		if ph.MapsRSS == 0 || ph.PeakRSS <= ph.MapsRSS {
			t.Errorf("%s: peak resident %d, maps %d: want 0 < maps < peak", ph.name, ph.PeakRSS, ph.MapsRSS)
		}
	}
	// At 1,000 a second for at least the two seconds around the reload.
	if res.Sent < 2000 || res.Lost != 0 || res.Wrong != 0 {
		t.Errorf("during the reload: %d sent, %d lost, %d wrong (first: %s); want at least 2000 sent, none lost or wrong", res.Sent, res.Lost, res.Wrong, res.Problem)
	}
}
