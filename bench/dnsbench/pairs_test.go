package dnsbench

import "testing"

// TestPairRatios wants one ratio per pair of rounds, the pair's sums
// divided, and none for a round without its pair.
func TestPairRatios(t *testing.T) {
	x := []float64{110, 120, 130, 140, 150}
	ref := []float64{100, 110, 120, 130, 140}
	got := pairRatios(x, ref)
	want := []float64{230.0 / 210, 270.0 / 250}
	if len(got) != len(want) {
		t.Fatalf("%d ratios from 5 rounds, want 2 (the odd round has no pair)", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pair %d: %v, want %v", i, got[i], want[i])
		}
	}
}
