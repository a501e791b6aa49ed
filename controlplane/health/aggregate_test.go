package health

import (
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/prober"
)

func tcpCheck(unhealthy, healthy int) *config.Check {
	return &config.Check{ID: "c", Type: "tcp", Interval: time.Second, UnhealthyThreshold: unhealthy, HealthyThreshold: healthy, Admin: AdminAuto}
}

var agg = config.Aggregation{PushInterval: time.Second, Quorum: 0.18}

// feed sends results from one checker and evaluates after each, returning
// the states.
func feed(c *check, checker string, results ...bool) []bool {
	var out []bool
	now := time.Unix(1000, 0)
	for _, ok := range results {
		seq := uint64(1)
		if p := c.per[checker]; p != nil {
			seq = p.seq + 1
		}
		reason := prober.ReasonOK
		if !ok {
			reason = prober.ReasonTimeout
		}
		c.ingest(checker, &prober.Entry{Index: c.index, Seq: seq, Healthy: ok, Reason: reason}, now)
		c.evaluate(now, agg, nil, nil)
		out = append(out, c.up)
		now = now.Add(time.Second)
	}
	return out
}

func TestThresholds(t *testing.T) {
	c := newCheck(tcpCheck(3, 2), 5)
	// Down on the third failure, not the second.
	if got := feed(c, "p1", false, false, false); got[1] != true || got[2] != false {
		t.Fatalf("states %v, want down on the third failure only", got)
	}
	if ReasonName(c.reason) != "timeout" {
		t.Errorf("reason %q, want timeout", ReasonName(c.reason))
	}
	// Up again on the second success, not the first.
	if got := feed(c, "p1", true, true); got[0] != false || got[1] != true {
		t.Fatalf("states %v, want up on the second success only", got)
	}
	// A failure streak interrupted by a success starts over.
	if got := feed(c, "p1", false, false, true, false, false); got[4] != true {
		t.Errorf("states %v: interrupted failures took it down", got)
	}
}

func TestSeqCountsOnce(t *testing.T) {
	c := newCheck(tcpCheck(2, 2), 5)
	now := time.Unix(1000, 0)
	e := &prober.Entry{Index: 5, Seq: 7, Healthy: false, Reason: prober.ReasonRefused}
	// The same result in three frames counts once.
	for range 3 {
		c.ingest("p1", e, now)
	}
	c.evaluate(now, agg, nil, nil)
	if !c.up {
		t.Fatal("one failure repeated in three frames took the check down")
	}
	e2 := *e
	e2.Seq = 8
	c.ingest("p1", &e2, now)
	c.evaluate(now, agg, nil, nil)
	if c.up {
		t.Fatal("two distinct failures did not take the check down")
	}
}

func TestInvertAdmin(t *testing.T) {
	cfg := tcpCheck(1, 1)
	cfg.Invert = true
	c := newCheck(cfg, 5)
	if got := feed(c, "p1", true); got[0] {
		t.Errorf("inverted check is up after a success")
	}
	if got := feed(c, "p1", false); !got[0] {
		t.Errorf("inverted check is down after a failure")
	}
	c.admin = AdminDown
	if got := feed(c, "p1", false); got[0] || ReasonName(c.reason) != "admin_down" {
		t.Errorf("admin down: up=%v reason %s", got[0], ReasonName(c.reason))
	}
	c.admin = AdminAuto
	if got := feed(c, "p1", false); !got[0] {
		t.Errorf("back to auto: the checkers' state is lost")
	}
}

func TestQuorum(t *testing.T) {
	c := newCheck(tcpCheck(1, 1), 5)
	now := time.Unix(1000, 0)
	// 10 checkers; healthy while more than 18% say so.
	for i := range 10 {
		c.ingest(string(rune('a'+i)), &prober.Entry{Index: 5, Seq: 1, Healthy: i < 2}, now)
	}
	c.evaluate(now, agg, nil, nil)
	if !c.up {
		t.Errorf("2 of 10 healthy (20%% > 18%%): down")
	}
	c.ingest("b", &prober.Entry{Index: 5, Seq: 2, Healthy: false}, now)
	c.evaluate(now, agg, nil, nil)
	if c.up {
		t.Errorf("1 of 10 healthy: up")
	}
	// Checkers not heard from within three intervals drop out of the
	// count: the one healthy checker left is 100%.
	later := now.Add(5 * time.Second)
	c.ingest("a", &prober.Entry{Index: 5, Seq: 3, Healthy: true}, later)
	c.evaluate(later, agg, nil, nil)
	if !c.up || c.fresh != 1 {
		t.Errorf("partition: up=%v fresh=%d, want up judged by the 1 checker heard", c.up, c.fresh)
	}
}

func TestHysteresis(t *testing.T) {
	c := newCheck(tcpCheck(1, 1), 5)
	h := config.Aggregation{PushInterval: time.Second, Quorum: 0.18, Hysteresis: &config.Hysteresis{Down: 0.2, Up: 0.85}}
	now := time.Unix(1000, 0)
	set := func(healthy int, seq uint64) bool {
		for i := range 10 {
			c.ingest(string(rune('a'+i)), &prober.Entry{Index: 5, Seq: seq, Healthy: i < healthy}, now)
		}
		c.evaluate(now, h, nil, nil)
		return c.up
	}
	steps := []struct {
		healthy int
		want    bool
	}{{5, true}, {2, true}, {1, false}, {5, false}, {8, false}, {9, true}, {3, true}}
	for i, s := range steps {
		if got := set(s.healthy, uint64(i+1)); got != s.want {
			t.Errorf("step %d: %d of 10 healthy: up=%v, want %v", i, s.healthy, got, s.want)
		}
	}
}

func TestCalculatedAndExternal(t *testing.T) {
	cfg := &config.Config{
		CheckIDs: []string{"calc", "a", "b", "ext"},
		HealthChecks: map[string]*config.Check{
			"a":    tcpCheck(1, 1),
			"b":    tcpCheck(1, 1),
			"calc": {Type: "calculated", Children: []string{"a", "b"}, MinHealthy: 2, Admin: AdminAuto},
			"ext":  {Type: "external", TTL: 10 * time.Second, Admin: AdminAuto},
		},
	}
	order := evalOrder(cfg)
	if pos := func(id string) int {
		for i, o := range order {
			if o == id {
				return i
			}
		}
		return -1
	}; pos("calc") < pos("a") || pos("calc") < pos("b") {
		t.Fatalf("order %v evaluates calc before its children", order)
	}
	checks := map[string]*check{}
	for id, cc := range cfg.HealthChecks {
		checks[id] = newCheck(cc, 1)
	}
	eval := func(now time.Time) map[string]bool {
		states := map[string]bool{}
		for _, id := range order {
			checks[id].evaluate(now, agg, checks, states)
			states[id] = checks[id].up
		}
		return states
	}
	now := time.Unix(1000, 0)
	feed(checks["b"], "p1", false)
	if s := eval(now); s["calc"] {
		t.Errorf("calc up with 1 of 2 children healthy, min 2")
	}
	feed(checks["b"], "p1", true)
	if s := eval(now); !s["calc"] {
		t.Errorf("calc down with both children healthy")
	}
	// External: down until reported, up while fresh, down once expired.
	if s := eval(now); s["ext"] || ReasonName(checks["ext"].reason) != "no_results" {
		t.Errorf("external before any report: up=%v reason %s", s["ext"], ReasonName(checks["ext"].reason))
	}
	c := checks["ext"]
	c.external, c.externalSet, c.expires = true, true, now.Add(c.cfg.TTL)
	if s := eval(now.Add(9 * time.Second)); !s["ext"] {
		t.Errorf("external within its ttl: down")
	}
	if s := eval(now.Add(11 * time.Second)); s["ext"] || ReasonName(c.reason) != "external_expired" {
		t.Errorf("external past its ttl: up=%v reason %s", s["ext"], ReasonName(c.reason))
	}
}
