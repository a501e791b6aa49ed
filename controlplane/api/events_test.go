package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// TestEventFilters: /api/v1/events selects by check, record, transition
// and time, and answers a bad parameter with 400 and what is wrong.
func TestEventFilters(t *testing.T) {
	s := newServer(t)
	at := func(m int) time.Time { return time.Date(2026, 1, 2, 3, m, 0, 0, time.UTC) }
	for _, ev := range []health.Event{
		{ID: "a", Time: at(0), Check: "web1", From: "healthy", To: "unhealthy", Records: []string{"www.example.test."}},
		{ID: "b", Time: at(1), Check: "web2", From: "healthy", To: "unhealthy", Records: []string{"www.example.test.", "api.example.test."}},
		{ID: "c", Time: at(2), Check: "web1", From: "unhealthy", To: "healthy", Records: []string{"www.example.test."}},
	} {
		s.events.Take(ev)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a", "b", "c"}},
		{"check=web1", []string{"a", "c"}},
		{"check=web1&check=web2", []string{"a", "b", "c"}},
		{"record=API.example.test", []string{"b"}},
		{"record=www.example.test.&transition=up", []string{"c"}},
		{"transition=down", []string{"a", "b"}},
		{"since=2026-01-02T03:01:00Z", []string{"b", "c"}},
		{"until=2026-01-02T03:01:00Z", []string{"a"}},
		{"since=2026-01-02T04:01:00%2B01:00&until=2026-01-02T03:01:30.5Z", []string{"b"}},
		{"check=db", []string{}},
	} {
		var e struct{ Events []struct{ ID string } }
		s.get(t, "/api/v1/events?"+tc.query, &e)
		got := []string{}
		for _, ev := range e.Events {
			got = append(got, ev.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("?%s: events %v, want %v", tc.query, got, tc.want)
		}
	}
	for query, want := range map[string]string{
		"chek=web1":                     `unknown parameter "chek", want check, record, transition, since or until`,
		"check=":                        "check: empty value",
		"since=yesterday":               `since: "yesterday" is not an RFC 3339 time such as 2026-01-02T15:04:05Z`,
		"until=2026-01-02":              `until: "2026-01-02" is not an RFC 3339 time such as 2026-01-02T15:04:05Z`,
		"transition=sideways":           `transition: "sideways", want up or down`,
		"transition=up&transition=down": "transition: given 2 times, want once",
		"since=2026-01-02T03:01:00Z&until=2026-01-02T03:01:00Z": "since 2026-01-02T03:01:00Z is not before until 2026-01-02T03:01:00Z",
	} {
		resp, err := http.Get(s.http.URL + "/api/v1/events?" + query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Error != want {
			t.Errorf("?%s: %s %q, want 400 %q", url.PathEscape(query), resp.Status, body.Error, want)
		}
	}
}
