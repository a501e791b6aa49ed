package main

import (
	"encoding/json"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/steadydns/steadydns/testenv"
)

// flapSections are the fleet sections of TestFleetFlaps, less the quorum or
// hysteresis line each run appends. coin probes a backend that fails every
// request at random with p = 0.5, with thresholds of 1: each checker's vote
// is a fresh coin toss every interval, independent of every other checker's.
// www.example.test answers the backend while coin is healthy, and a
// candidate without a check always.
const flapSections = `zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  coin: { type: http, target: 198.18.67.1, port: 80, path: /healthz, interval: 500ms, timeout: 300ms, unhealthy_threshold: 1, healthy_threshold: 1 }
records:
  - name: www.example.test.
    type: A
    ttl: 30
    answers:
      - { value: 198.18.67.1, check: coin }
      - { value: 198.18.67.9 }
aggregation:
  push_interval: 500ms
  stale_after: 3s
  table_size: 1024
`

// flapIntervals is how many check intervals (= push periods) each run
// watches.
const flapIntervals = 30

// TestFleetFlaps runs twelve checkers, as separate processes in three
// regions, against a backend that fails half of all probes at random, first
// with a 50% quorum and then, pushed as a new revision, with hysteresis at
// 8% and 92%, and counts the check's changes on both aggregators and in both
// edges' answers over 30 intervals.
//
// With 12 checkers each healthy with p = 0.5, the check is healthy under
// the quorum when 7 or more say so: p = 1586/4096 = 0.387 at every push, so
// it changes at a push with p = 2 × 0.387 × 0.613 = 0.475, 14.2 times in 30
// on average; fewer than 5 has p < 1e-4. Under the hysteresis a healthy
// check goes down only when all 12 say unhealthy (0/12 < 8%; 1/12 is not)
// and comes back only when all 12 say healthy (11/12 < 92%): p = 1/4096 at
// a push, so one change in 30 has p = 0.007 and two p < 3e-5.
func TestFleetFlaps(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	t.Parallel()
	r := newFleetRig(t, testenv.FleetOptions{Regions: 3, ProbersPerRegion: 4, Edges: 2, Aggregators: 2, Backends: 1},
		flapSections+"  quorum: 50%\n")
	r.write("hysteresis.yaml", "server:\n  listen: [\"198.18.64.1:53\"]\n"+r.cluster+flapSections+"  hysteresis: { down: 8%, up: 92% }\n")
	r.startBackend(0, "--fail", "0.5")
	r.startFleet()
	checkers := 0
	for _, ps := range r.f.Probers {
		checkers += len(ps)
	}
	for _, a := range r.f.Aggregators {
		r.waitFor(a.Role+" counting every checker", 30*time.Second, func() bool {
			n := 0
			for _, v := range r.votes(a.Role, "coin") {
				if v.Counted {
					n++
				}
			}
			return n == checkers
		})
	}

	// The edges' answers are asked once a push period, so they see fewer
	// changes than the aggregators make: 3 or more has p > 0.99999 all
	// the same.
	events, answers := r.flaps()
	t.Logf("with a 50%% quorum, in %d intervals: events %v, answer changes %v", flapIntervals, events, answers)
	for who, n := range events {
		if n < 5 {
			t.Errorf("with a 50%% quorum %s made %d changes of coin in %d intervals, want 5 or more (14 on average)", who, n, flapIntervals)
		}
	}
	for who, n := range answers {
		if n < 3 {
			t.Errorf("with a 50%% quorum %s's answers changed %d times in %d intervals, want 3 or more", who, n, flapIntervals)
		}
	}

	r.push("hysteresis.yaml")
	r.waitFor("revision 2 everywhere", 10*time.Second, func() bool {
		for _, h := range append(slices.Clone(r.f.Edges), r.f.Aggregators...) {
			if r.fleetView(h, h.Role).Revision != 2 {
				return false
			}
		}
		return true
	})
	// The edges take tables of the new config hash from the next push on.
	time.Sleep(2 * fleetPush)
	events, answers = r.flaps()
	t.Logf("with hysteresis at 8%% and 92%%, in %d intervals: events %v, answer changes %v", flapIntervals, events, answers)
	for who, n := range events {
		if n > 1 {
			t.Errorf("with hysteresis %s made %d changes of coin in %d intervals, want at most 1", who, n, flapIntervals)
		}
	}
	for who, n := range answers {
		if n > 1 {
			t.Errorf("with hysteresis %s's answers changed %d times in %d intervals, want at most 1", who, n, flapIntervals)
		}
	}
}

// flaps watches flapIntervals push periods and counts, per aggregator, its
// events for coin in that time, and per edge, the changes in its XDP
// answers for www.example.test, asked once a push period.
func (r *fleetRig) flaps() (events, answers map[string]int) {
	r.t.Helper()
	events, answers = map[string]int{}, map[string]int{}
	last := map[string][]string{}
	for _, e := range r.f.Edges {
		answers[e.Role] = 0 // an edge whose answers never change is counted too
	}
	start := time.Now()
	for i := range flapIntervals {
		for _, e := range r.f.Edges {
			got, err := r.answers(e, www)
			if err != nil {
				r.t.Fatalf("asking %s: %v", e.Role, err)
			}
			if i > 0 && !slices.Equal(got, last[e.Role]) {
				answers[e.Role]++
			}
			last[e.Role] = got
		}
		time.Sleep(time.Until(start.Add(time.Duration(i+1) * fleetPush)))
	}
	end := time.Now()
	for _, a := range r.f.Aggregators {
		n := 0
		for _, ev := range r.events(a) {
			if ev.Check == "coin" && ev.Time.After(start) && ev.Time.Before(end) {
				n++
			}
		}
		events[a.Role] = n
	}
	return events, answers
}

type apiEvent struct {
	Time  time.Time `json:"time"`
	Check string    `json:"check"`
}

// events reads the event log of the aggregator on h.
func (r *fleetRig) events(h *testenv.Host) []apiEvent {
	r.t.Helper()
	resp, err := h.HTTPClient().Get("http://" + net.JoinHostPort(h.V4.String(), "9153") + "/api/v1/events")
	if err != nil {
		r.t.Fatalf("events of %s: %v", h.Role, err)
	}
	defer resp.Body.Close()
	var out struct {
		Events []apiEvent `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		r.t.Fatalf("events of %s: %v", h.Role, err)
	}
	return out.Events
}
