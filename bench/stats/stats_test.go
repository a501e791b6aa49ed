package stats

import "testing"

// TestMedianCI checks the interval against the binomial tables: of 20
// values the 6th and 15th smallest (P(X ≤ 5) = 0.021 for X ~ B(20, ½)),
// of 8 the 1st and 8th (P(X ≤ 0) = 0.004, P(X ≤ 1) = 0.035), and the
// whole range when there are too few for 95%.
func TestMedianCI(t *testing.T) {
	var twenty []float64
	for i := 20; i >= 1; i-- {
		twenty = append(twenty, float64(i))
	}
	for _, c := range []struct {
		xs     []float64
		lo, hi float64
	}{
		{twenty, 6, 15},
		{[]float64{8, 7, 6, 5, 4, 3, 2, 1}, 1, 8},
		{[]float64{3, 1, 2}, 1, 3},
		{[]float64{5}, 5, 5},
	} {
		if lo, hi := MedianCI(c.xs); lo != c.lo || hi != c.hi {
			t.Errorf("MedianCI of %d values: %v–%v, want %v–%v", len(c.xs), lo, hi, c.lo, c.hi)
		}
	}
}
