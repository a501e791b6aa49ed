package bench

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

func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Summary{Median: percentile(s, 0.5), Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// format prints the median with its range, or a dash when not measured.
func (s Summary) format(unit float64, digits int) string {
	if s.N == 0 {
		return "—"
	}
	if s.N == 1 {
		return fmt.Sprintf("%.*f", digits, s.Median/unit)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", digits, s.Median/unit, digits, s.Min/unit, digits, s.Max/unit)
}

// percentile of sorted values, interpolating between neighbours; the 0.5
// of an even count is the mean of the middle two.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	x := p * float64(len(sorted)-1)
	lo := int(math.Floor(x))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(x-float64(lo))
}
