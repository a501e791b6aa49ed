package dnsbench

import (
	"math/rand/v2"
	"testing"
)

// TestZipfRank wants each u to fall in its rank's slice of the cumulative
// distribution: over 4 names the shares are 12, 6, 4 and 3 of 25.
func TestZipfRank(t *testing.T) {
	z := newZipf(4)
	for _, c := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.47, 0}, {0.49, 1}, {0.71, 1}, {0.73, 2}, {0.87, 2}, {0.89, 3}, {0.9999, 3}} {
		if got := z.rank(c.u); got != c.want {
			t.Errorf("rank(%v) = %d, want %d", c.u, got, c.want)
		}
	}
}

// TestZipfDraws wants the hottest name of 1,000 asked 1/H(1000) = 13.4% of
// the time, and the hottest 1% (10 names) H(10)/H(1000) = 39.1%.
func TestZipfDraws(t *testing.T) {
	draws := zipfDraws(rand.New(rand.NewPCG(1, 2)), 1000, 200_000)
	var first int
	for _, d := range draws {
		if d < 0 || d >= 1000 {
			t.Fatalf("rank %d out of 0 … 999", d)
		}
		if d == 0 {
			first++
		}
	}
	if share := float64(first) / float64(len(draws)); share < 0.130 || share > 0.138 {
		t.Errorf("the hottest name took %.4f of the queries, want 0.130–0.138", share)
	}
	if share := topShare(draws, 1000); share < 0.386 || share > 0.396 {
		t.Errorf("the hottest 1%% took %.4f of the queries, want 0.386–0.396", share)
	}
}
