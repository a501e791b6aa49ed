package fleetbench

import (
	"fmt"
	"math"

	"github.com/steadydns/steadydns/bench/stats"
)

// Effect is what one level of a factor of the constancy cells (a number
// of checks, or a share failing) costs a push over the factor's first
// level, the other factor's levels alike: per run, the geometric mean,
// over the other factor's levels, of the two cells' ratio.
type Effect struct {
	Factor string // "checks" or "unhealthy"
	Level  int    // the level read against the first
	First  int
	Ratio  stats.Summary // over the runs
	CI     [2]float64
}

// effects reads each factor's levels against its first, run by run. ms
// holds every run's CPU per push, cell by cell in the constancy's order:
// checks outer, unhealthy inner, and the first cell's repeat last, which the
// first cell is averaged with. Each level is read against the first with
// the other factor held, so a share failing is judged at every number of
// checks and the other way round, and the seven cells' noise averages
// into two figures instead of deciding a spread of seven.
func effects(checks, unhealthy []int, ms [][]float64) ([]Effect, error) {
	nc, nu := len(checks), len(unhealthy)
	var out []Effect
	for _, run := range ms {
		if len(run) != nc*nu+1 {
			return nil, fmt.Errorf("reading effects: a run of %d cells, want %d and a repeat", len(run), nc*nu)
		}
	}
	cell := func(run []float64, c, u int) float64 {
		if c == 0 && u == 0 {
			return (run[0] + run[len(run)-1]) / 2
		}
		return run[c*nu+u]
	}
	read := func(factor string, level, first int, ratio func(run []float64) float64) {
		rs := make([]float64, len(ms))
		for i, run := range ms {
			rs[i] = ratio(run)
		}
		e := Effect{Factor: factor, Level: level, First: first, Ratio: stats.Summarize(rs)}
		e.CI[0], e.CI[1] = stats.MedianCI(rs)
		out = append(out, e)
	}
	for c := 1; c < nc; c++ {
		read("checks", checks[c], checks[0], func(run []float64) float64 {
			p := 1.0
			for u := range nu {
				p *= cell(run, c, u) / cell(run, 0, u)
			}
			return math.Pow(p, 1/float64(nu))
		})
	}
	for u := 1; u < nu; u++ {
		read("unhealthy", unhealthy[u], unhealthy[0], func(run []float64) float64 {
			p := 1.0
			for c := range nc {
				p *= cell(run, c, u) / cell(run, c, 0)
			}
			return math.Pow(p, 1/float64(nc))
		})
	}
	return out, nil
}

// level and first name the effect's two levels as the report does.
func (e Effect) level() string { return e.name(e.Level) }
func (e Effect) first() string { return e.name(e.First) }

func (e Effect) name(v int) string {
	if e.Factor == "checks" {
		return fmt.Sprintf("%d checks", v)
	}
	return fmt.Sprintf("%d%% unhealthy", v)
}

// rise prints a median ratio and its interval as percent changes:
// "+4.2% (+3.5 to +4.9%)".
func rise(median float64, ci [2]float64) string {
	return fmt.Sprintf("%+.1f%% (%+.1f to %+.1f%%)", 100*(median-1), 100*(ci[0]-1), 100*(ci[1]-1))
}
