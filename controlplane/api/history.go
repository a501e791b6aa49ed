package api

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/history"
)

// HistoryView is a check's history: /api/v1/checks/{id}/history.
type HistoryView struct {
	Check string `json:"check"`
	// Probed says this host's prober runs checks; without one the
	// buckets are empty, and another host's API has them.
	Probed      bool        `json:"probed"`
	HourStep    float64     `json:"hour_step_seconds"`
	Hour        []PointView `json:"hour"` // oldest first
	DayStep     float64     `json:"day_step_seconds"`
	Day         []PointView `json:"day"`
	Transitions []EventView `json:"transitions"` // the check's events of the last day, oldest first
}

// PointView is one bucket of a check's results.
type PointView struct {
	Start    time.Time `json:"start"`
	Results  int       `json:"results"`
	Failures int       `json:"failures"`
	MeanMs   float64   `json:"latency_ms_mean"`
	MaxMs    float64   `json:"latency_ms_max"`
}

func pointViews(ps []history.Point) []PointView {
	out := []PointView{}
	for _, p := range ps {
		out = append(out, PointView{Start: p.Start, Results: p.Results, Failures: p.Failures, MeanMs: ms(p.Mean), MaxMs: ms(p.Max)})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func checkHistory(w http.ResponseWriter, r *http.Request, st State) {
	id := r.PathValue("id")
	if !slices.ContainsFunc(st.Statuses(), func(s health.Status) bool { return s.ID == id }) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("check %q: %v", id, health.ErrUnknownCheck))
		return
	}
	now := time.Now()
	v := HistoryView{Check: id, HourStep: history.FineStep.Seconds(), DayStep: history.CoarseStep.Seconds(), Hour: []PointView{}, Day: []PointView{}}
	if hs := st.History(); hs != nil {
		v.Probed = true
		h, _ := hs.Of(id, now)
		v.Hour, v.Day = pointViews(h.Hour), pointViews(h.Day)
	}
	v.Transitions = eventViews(st.Events().Select(health.Filter{Checks: []string{id}, Since: now.Add(-history.CoarseSpan)}))
	writeJSON(w, v)
}
