package fleetbench

import (
	"math"
	"testing"
)

// TestEffects: each level is read against its factor's first with the
// other factor held, the first cell averaged with its repeat, and the
// median over runs taken.
func TestEffects(t *testing.T) {
	// 2 checks levels × 3 shares, and the repeat. Runs scale the whole
	// machine up and down; the cells of 65,535 checks cost 4% more, 100%
	// unhealthy 2% more at 10 checks only, and the repeat 10% more than
	// the first, which the average with it halves.
	base := []float64{10, 10, 10.2, 10.4, 10.4, 10.4, 11}
	var ms [][]float64
	for _, scale := range []float64{1, 1.3, 0.8} {
		run := make([]float64, len(base))
		for i, v := range base {
			run[i] = v * scale
		}
		ms = append(ms, run)
	}
	got, err := effects([]int{10, 65535}, []int{0, 50, 100}, ms)
	if err != nil {
		t.Fatal(err)
	}
	ref := 10.5 // the first cell and its repeat
	want := []struct {
		factor string
		level  int
		ratio  float64
	}{
		{"checks", 65535, math.Cbrt(10.4 / ref * 10.4 / 10 * 10.4 / 10.2)},
		{"unhealthy", 50, math.Sqrt(10 / ref * 10.4 / 10.4)},
		{"unhealthy", 100, math.Sqrt(10.2 / ref * 10.4 / 10.4)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d effects, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Factor != w.factor || g.Level != w.level || g.Ratio.N != 3 || math.Abs(g.Ratio.Median-w.ratio) > 1e-12 ||
			math.Abs(g.Ratio.Min-w.ratio) > 1e-12 || math.Abs(g.Ratio.Max-w.ratio) > 1e-12 || g.CI[0] != g.Ratio.Min || g.CI[1] != g.Ratio.Max {
			t.Errorf("effect %d: %+v, want %s %d at %.6f the same in every run", i, g, w.factor, w.level, w.ratio)
		}
	}
	if g := got[0]; g.First != 10 || got[1].First != 0 {
		t.Errorf("first levels %d and %d, want 10 checks and 0%%", g.First, got[1].First)
	}
	if _, err := effects([]int{10, 65535}, []int{0, 50, 100}, [][]float64{{1, 2, 3}}); err == nil {
		t.Error("a run of 3 cells read as 6 and a repeat")
	}
}
