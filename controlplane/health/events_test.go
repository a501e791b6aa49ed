package health_test

import (
	"slices"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// TestFilter: each field of a filter narrows the events it selects, and
// the zero filter selects them all.
func TestFilter(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	evs := []health.Event{
		{ID: "a", Time: at(10), Check: "web1", To: health.StateUnhealthy, Records: []string{"www.example.test."}},
		{ID: "b", Time: at(20), Check: "web2", To: health.StateUnhealthy, Records: []string{"www.example.test.", "api.example.test."}},
		{ID: "c", Time: at(30), Check: "web1", To: health.StateHealthy, Records: []string{"www.example.test."}},
		{ID: "d", Time: at(40), Check: "db", To: health.StateUnhealthy},
	}
	for _, tc := range []struct {
		name string
		f    health.Filter
		want []string
	}{
		{"zero", health.Filter{}, []string{"a", "b", "c", "d"}},
		{"one check", health.Filter{Checks: []string{"web1"}}, []string{"a", "c"}},
		{"two checks", health.Filter{Checks: []string{"web2", "db"}}, []string{"b", "d"}},
		{"record", health.Filter{Records: []string{"api.example.test."}}, []string{"b"}},
		{"record of two checks", health.Filter{Records: []string{"www.example.test."}}, []string{"a", "b", "c"}},
		{"down", health.Filter{To: health.StateUnhealthy}, []string{"a", "b", "d"}},
		{"up", health.Filter{To: health.StateHealthy}, []string{"c"}},
		{"since is inclusive", health.Filter{Since: at(20)}, []string{"b", "c", "d"}},
		{"until is exclusive", health.Filter{Until: at(30)}, []string{"a", "b"}},
		{"all at once", health.Filter{Checks: []string{"web1"}, Records: []string{"www.example.test."}, To: health.StateUnhealthy, Since: at(5), Until: at(11)}, []string{"a"}},
		{"nothing", health.Filter{Checks: []string{"web1"}, Records: []string{"api.example.test."}}, nil},
	} {
		var l health.EventLog
		for _, ev := range evs {
			l.Take(ev)
		}
		var got []string
		for _, ev := range l.Select(tc.f) {
			got = append(got, ev.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: selected %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHandle: the handler completes what Add takes before the log keeps
// it, and never sees what Take takes.
func TestHandle(t *testing.T) {
	var l health.EventLog
	var seen []string
	l.Handle(func(ev *health.Event) {
		seen = append(seen, ev.Check)
		ev.Host = "a1"
	})
	l.Add(health.Event{Check: "web1"})
	l.Take(health.Event{Check: "web2", Host: "a2"})
	evs := l.Events()
	if !slices.Equal(seen, []string{"web1"}) || len(evs) != 2 || evs[0].Host != "a1" || evs[1].Host != "a2" {
		t.Errorf("handler saw %v, log %+v; want web1 alone seen and completed", seen, evs)
	}
}

func TestRecordName(t *testing.T) {
	for in, want := range map[string]string{"WWW.Example.test": "www.example.test.", "www.example.test.": "www.example.test."} {
		if got := health.RecordName(in); got != want {
			t.Errorf("RecordName(%q) = %q, want %q", in, got, want)
		}
	}
}
