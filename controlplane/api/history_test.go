package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
)

// TestHistory: a check's history holds its prober's results by bucket and
// its transitions of the last day; an unknown check is a 404.
func TestHistory(t *testing.T) {
	s := newServer(t)
	now := time.Now().Truncate(10 * time.Second)
	s.history.Add("web1", now, true, 2*time.Millisecond)
	s.history.Add("web1", now.Add(time.Second), false, 4*time.Millisecond)
	s.push(t, now)
	s.fail(t, now.Add(time.Second))
	s.push(t, now.Add(time.Second))
	var h api.HistoryView
	s.get(t, "/api/v1/checks/web1/history", &h)
	if h.Check != "web1" || !h.Probed || h.HourStep != 10 || h.DayStep != 300 {
		t.Errorf("history %+v: want web1's, probed, steps 10s and 300s", h)
	}
	want := api.PointView{Start: now.UTC(), Results: 2, Failures: 1, MeanMs: 3, MaxMs: 4}
	if len(h.Hour) != 1 || h.Hour[0] != want {
		t.Errorf("hour %+v, want %+v", h.Hour, want)
	}
	if len(h.Day) != 1 || h.Day[0].Results != 2 {
		t.Errorf("day %+v, want one bucket of 2 results", h.Day)
	}
	if len(h.Transitions) != 1 || h.Transitions[0].Check != "web1" || h.Transitions[0].To != "unhealthy" {
		t.Errorf("transitions %+v, want web1 going unhealthy", h.Transitions)
	}
	s.get(t, "/api/v1/checks/web2/history", &h)
	if len(h.Hour) != 0 || len(h.Transitions) != 0 {
		t.Errorf("web2 %+v: want no results, no transitions", h)
	}
	resp, err := http.Get(s.http.URL + "/api/v1/checks/nope/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown check: %s, want 404", resp.Status)
	}
}
