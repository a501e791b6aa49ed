package api_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/health"
)

func (s *server) Shift(region string, d time.Duration, reason, who string) error {
	now := time.Now()
	if d == 0 {
		return s.agg.Unshift(region, who, now)
	}
	return s.agg.Shift(health.Shift{Region: region, Reason: reason, Who: who, Started: now, Expires: now.Add(d)})
}

func (s *server) Shifts() ([]health.Shift, error) { return s.agg.Shifts(time.Now()), nil }

// geoConfig is configFile with regions r1 and r2, and geo's answers in
// them.
var geoConfig = strings.Replace(configFile, `  listen: ["198.18.0.2:53"]
`, `  listen: ["198.18.0.2:53"]
  geo:
    regions:
      r1: { prefixes: ["198.18.64.0/24"] }
      r2: { prefixes: ["198.18.65.0/24"] }
`, 1)

var geoRecords = strings.Replace(geoConfig, "aggregation:\n", `  - name: geo.example.test.
    type: A
    answers:
      - { value: 198.18.1.5, check: web1, region: r1 }
      - { value: 198.18.1.6, check: web2, region: r2 }
aggregation:
`, 1)

func (s *server) del(t *testing.T, path string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, s.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestShifts: a shift is validated, listed with who sent it, takes the
// region's answers out of /api/v1/records with the reason, shows in the
// events, and a DELETE ends it.
func TestShifts(t *testing.T) {
	s := newServerWith(t, geoRecords)
	for _, c := range []struct{ path, body, want string }{
		{"/api/v1/shifts/r9", `{"duration": "30m", "reason": "x"}`, "shifting r9 away: no such region in server.geo.regions"},
		{"/api/v1/shifts/r1", `{"duration": "30", "reason": "x"}`, `duration "30" is not a duration such as 30m, from 1s to 72h0m0s`},
		{"/api/v1/shifts/r1", `{"duration": "73h", "reason": "x"}`, "shifting r1 away: duration 73h0m0s is outside 1s to 72h0m0s"},
		{"/api/v1/shifts/r1", `{"duration": "30m"}`, "shifting r1 away: a reason is required: it shows in the events and in status"},
		{"/api/v1/shifts/r1", `{"duration": "30m", "reason": "x", "who": "me"}`, `the body is not {"duration": "30m", "reason": "..."}: json: unknown field "who"`},
		{"/api/v1/shifts/r1", strings.Repeat(" ", 1025), "the body is over 1024 bytes"},
	} {
		if code, msg := s.put(t, c.path, c.body); msg != c.want || code == http.StatusNoContent {
			t.Errorf("PUT %s %.40q: %d %q, want %q", c.path, c.body, code, msg, c.want)
		}
	}
	if code := s.del(t, "/api/v1/shifts/r1"); code != http.StatusNotFound {
		t.Errorf("DELETE of a shift there is not: %d, want 404", code)
	}

	if code, msg := s.put(t, "/api/v1/shifts/r1", `{"duration": "30m", "reason": "INC-1: r1 packet loss"}`); code != http.StatusNoContent {
		t.Fatalf("PUT a shift: %d %s", code, msg)
	}
	s.push(t, time.Now())
	var list struct{ Shifts []api.ShiftView }
	s.get(t, "/api/v1/shifts", &list)
	if len(list.Shifts) != 1 {
		t.Fatalf("shifts %+v, want r1's", list.Shifts)
	}
	got := list.Shifts[0]
	if got.Region != "r1" || got.Reason != "INC-1: r1 packet loss" || got.Who != "api client 127.0.0.1" || got.Expires.Sub(got.Started) != 30*time.Minute {
		t.Errorf("shift %+v", got)
	}
	var recs recordList
	s.get(t, "/api/v1/records", &recs)
	var answers []string
	for _, a := range recs.find(t, "geo.example.test.").Answers {
		answers = append(answers, a.Value+" "+a.Reason)
	}
	if want := []string{"198.18.1.5 unhealthy: region r1 is shifted away", "198.18.1.6 healthy: no_results"}; !slices.Equal(answers, want) {
		t.Errorf("geo's answers %q, want %q", answers, want)
	}
	resp, err := http.Get(s.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^steadydns_shift_remaining_seconds\{region="r1"\} 1[78]\d\d(\.\d+)?(e\+03)?$`).Match(body) {
		t.Errorf("/metrics lacks r1's shift with about 30 minutes left:\n%s", regexp.MustCompile(`(?m)^steadydns_shift.*$`).FindAll(body, -1))
	}
	var evs struct{ Events []map[string]any }
	s.get(t, "/api/v1/events", &evs)
	if n := len(evs.Events); n != 1 || evs.Events[0]["region"] != "r1" || evs.Events[0]["to"] != "shifted" {
		t.Errorf("events %v, want r1's shift", evs.Events)
	}

	if code := s.del(t, "/api/v1/shifts/r1"); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	s.push(t, time.Now())
	s.get(t, "/api/v1/shifts", &list)
	recs = recordList{}
	s.get(t, "/api/v1/records", &recs)
	if a := recs.find(t, "geo.example.test.").Answers[0]; len(list.Shifts) != 0 || !a.In || !a.Healthy {
		t.Errorf("after DELETE: shifts %+v, r1's answer %+v", list.Shifts, a)
	}
}
