package health

import (
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/prober"
)

var agg = config.Aggregation{PushInterval: time.Second, Quorum: 0.18}

// slots is a small aggregator: n slots, one per check, and their checkers.
type slots struct {
	cfgs     []slotCfg
	children map[uint32][]uint32
	states   []slotState
	tracks   map[string]*track
	list     []*track
	now      time.Time
	agg      config.Aggregation
}

func newSlots(cfgs ...slotCfg) *slots {
	s := &slots{cfgs: append([]slotCfg{unusedSlot(time.Second)}, cfgs...), tracks: map[string]*track{}, now: time.Unix(1000, 0), agg: agg}
	s.states = make([]slotState, len(s.cfgs))
	for i := range s.states {
		s.states[i].state, s.states[i].up = true, true
	}
	return s
}

func tcpSlot(unhealthy, healthy int) slotCfg {
	return newSlotCfg(&config.Check{Type: "tcp", Interval: time.Second, UnhealthyThreshold: unhealthy, HealthyThreshold: healthy, Admin: AdminAuto}, time.Second)
}

func (s *slots) result(checker string, slot uint32, seq uint64, ok bool) {
	tr := s.tracks[checker]
	if tr == nil {
		tr = newTrack(len(s.states), s.states)
		s.tracks[checker] = tr
		s.list = append(s.list, tr)
	}
	reason := prober.ReasonOK
	if !ok {
		reason = prober.ReasonTimeout
	}
	tr.ingest(slot, &s.cfgs[slot], &prober.Entry{Index: slot, Seq: seq, Healthy: ok, Reason: reason}, s.now.UnixNano())
}

func (s *slots) eval(i int) bool {
	evaluate(i, &s.cfgs[i], &s.states[i], s.states, s.list, s.children[uint32(i)], &s.agg, s.now)
	return s.states[i].up
}

// feed sends consecutive results for slot 1 from one checker, one per
// second, and returns the state after each.
func (s *slots) feed(checker string, results ...bool) []bool {
	var out []bool
	for _, ok := range results {
		var seq uint64 = 1
		if tr := s.tracks[checker]; tr != nil {
			seq = tr.seq[1] + 1
		}
		s.result(checker, 1, seq, ok)
		out = append(out, s.eval(1))
		s.now = s.now.Add(time.Second)
	}
	return out
}

func TestThresholds(t *testing.T) {
	s := newSlots(tcpSlot(3, 2))
	// Down on the third failure, not the second.
	if got := s.feed("p1", false, false, false); got[1] != true || got[2] != false {
		t.Fatalf("states %v, want down on the third failure only", got)
	}
	if r := ReasonName(s.states[1].reason); r != "timeout" {
		t.Errorf("reason %q, want timeout", r)
	}
	// Up again on the second success, not the first.
	if got := s.feed("p1", true, true); got[0] != false || got[1] != true {
		t.Fatalf("states %v, want up on the second success only", got)
	}
	// A failure streak interrupted by a success starts over.
	if got := s.feed("p1", false, false, true, false, false); got[4] != true {
		t.Errorf("states %v: interrupted failures took it down", got)
	}
}

func TestSeqCountsOnce(t *testing.T) {
	s := newSlots(tcpSlot(2, 2))
	// The same result in three frames counts once.
	for range 3 {
		s.result("p1", 1, 7, false)
	}
	if !s.eval(1) {
		t.Fatal("one failure repeated in three frames took the check down")
	}
	s.result("p1", 1, 8, false)
	if s.eval(1) {
		t.Fatal("two distinct failures did not take the check down")
	}
	// Padding (seq 0) changes nothing.
	s.result("p1", 1, 0, true)
	if s.eval(1) {
		t.Fatal("a padding entry brought the check back")
	}
}

func TestInvertAdmin(t *testing.T) {
	c := tcpSlot(1, 1)
	c.invert = true
	s := newSlots(c)
	if got := s.feed("p1", true); got[0] {
		t.Errorf("inverted check is up after a success")
	}
	if got := s.feed("p1", false); !got[0] {
		t.Errorf("inverted check is down after a failure")
	}
	s.cfgs[1].admin = adminDown
	if got := s.feed("p1", false); got[0] || ReasonName(s.states[1].reason) != "admin_down" {
		t.Errorf("admin down: up=%v reason %s", got[0], ReasonName(s.states[1].reason))
	}
	s.cfgs[1].admin = adminAuto
	if got := s.feed("p1", false); !got[0] {
		t.Errorf("back to auto: the checkers' state is lost")
	}
}

func TestQuorum(t *testing.T) {
	s := newSlots(tcpSlot(1, 1))
	// 10 checkers; healthy while more than 18% say so.
	for i := range 10 {
		s.result(string(rune('a'+i)), 1, 1, i < 2)
	}
	if !s.eval(1) {
		t.Errorf("2 of 10 healthy (20%% > 18%%): down")
	}
	s.result("b", 1, 2, false)
	if s.eval(1) {
		t.Errorf("1 of 10 healthy: up")
	}
	// Checkers not heard from within three intervals drop out of the
	// count: the one healthy checker left is 100%.
	s.now = s.now.Add(5 * time.Second)
	s.result("a", 1, 3, true)
	if !s.eval(1) || s.states[1].fresh != 1 {
		t.Errorf("partition: up=%v fresh=%d, want up judged by the 1 checker heard", s.states[1].up, s.states[1].fresh)
	}
}

func TestHysteresis(t *testing.T) {
	s := newSlots(tcpSlot(1, 1))
	s.agg.Hysteresis = &config.Hysteresis{Down: 0.2, Up: 0.85}
	steps := []struct {
		healthy int
		want    bool
	}{{5, true}, {2, true}, {1, false}, {5, false}, {8, false}, {9, true}, {3, true}}
	for k, st := range steps {
		for i := range 10 {
			s.result(string(rune('a'+i)), 1, uint64(k+1), i < st.healthy)
		}
		if got := s.eval(1); got != st.want {
			t.Errorf("step %d: %d of 10 healthy: up=%v, want %v", k, st.healthy, got, st.want)
		}
	}
}

func TestCalculatedAndExternal(t *testing.T) {
	cfg := &config.Config{
		CheckIDs: []string{"calc", "a", "b", "ext"},
		HealthChecks: map[string]*config.Check{
			"a":    {Type: "tcp", Interval: time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1, Admin: AdminAuto},
			"b":    {Type: "tcp", Interval: time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1, Admin: AdminAuto},
			"calc": {Type: "calculated", Children: []string{"a", "b"}, MinHealthy: 2, Admin: AdminAuto},
			"ext":  {Type: "external", TTL: 10 * time.Second, Admin: AdminAuto},
		},
	}
	index := map[string]uint32{"a": 1, "b": 2, "calc": 3, "ext": 4}
	if order := evalOrder(cfg, index); len(order) != 1 || order[0] != 3 {
		t.Fatalf("calculated order %v, want [3]", order)
	}
	s := newSlots(newSlotCfg(cfg.HealthChecks["a"], time.Second), newSlotCfg(cfg.HealthChecks["b"], time.Second),
		newSlotCfg(cfg.HealthChecks["calc"], time.Second), newSlotCfg(cfg.HealthChecks["ext"], time.Second))
	s.children = map[uint32][]uint32{3: {1, 2}}
	s.result("p1", 2, 1, false)
	s.eval(1)
	s.eval(2)
	if s.eval(3) {
		t.Errorf("calc up with 1 of 2 children healthy, min 2")
	}
	s.result("p1", 2, 2, true)
	s.eval(2)
	if !s.eval(3) {
		t.Errorf("calc down with both children healthy")
	}
	// External: down until reported, up while fresh, down once expired.
	if s.eval(4) || ReasonName(s.states[4].reason) != "no_results" {
		t.Errorf("external before any report: up=%v reason %s", s.states[4].up, ReasonName(s.states[4].reason))
	}
	st := &s.states[4]
	st.extUp, st.extSet, st.extExpires = true, true, s.now.Add(10*time.Second).UnixNano()
	s.now = s.now.Add(9 * time.Second)
	if !s.eval(4) {
		t.Errorf("external within its ttl: down")
	}
	s.now = s.now.Add(2 * time.Second)
	if s.eval(4) || ReasonName(s.states[4].reason) != "external_expired" {
		t.Errorf("external past its ttl: up=%v reason %s", s.states[4].up, ReasonName(s.states[4].reason))
	}
}
