// Package stats holds what both benchmark harnesses report with: the
// median, range and confidence interval of repeated measurements, and the
// machine they ran on.
package stats

import (
	"fmt"
	"math"
	"slices"
)

// Summary is a measurement repeated N times: its median and its range.
type Summary struct {
	Median, Min, Max float64
	N                int
}

// Summarize is the median and range of xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Summary{Median: Percentile(s, 0.5), Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// Format prints the median with its range, or a dash when not measured.
func (s Summary) Format(unit float64, digits int) string {
	if s.N == 0 {
		return "—"
	}
	if s.N == 1 {
		return fmt.Sprintf("%.*f", digits, s.Median/unit)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", digits, s.Median/unit, digits, s.Min/unit, digits, s.Max/unit)
}

// Percentile of sorted values, interpolating between neighbours; the 0.5
// of an even count is the mean of the middle two.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	x := p * float64(len(sorted)-1)
	lo := int(math.Floor(x))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(x-float64(lo))
}

// MedianCI is a 95% confidence interval of the median of xs from their
// order statistics, whatever their distribution: the k-th smallest of n
// lies above the true median with probability P(Binomial(n, ½) < k). With
// too few values for 95% it is their whole range.
func MedianCI(xs []float64) (lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	// below is P(Binomial(n, ½) ≤ k-1), the chance that fewer than k
	// values lie below the median.
	k, below, c := 0, 0.0, math.Pow(0.5, float64(n))
	for i := 0; i <= n/2; i++ {
		if below+c > 0.025 {
			break
		}
		below += c
		k = i + 1
		c = c * float64(n-i) / float64(i+1)
	}
	if k == 0 {
		return s[0], s[n-1]
	}
	return s[k-1], s[n-k]
}
