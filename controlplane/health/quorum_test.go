package health_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/prober"
)

// checkers names checkers c<from>…c<to-1>, each with the vote sign ("+"
// healthy, "-" unhealthy) that quorumStep.frames reads.
func checkers(from, to int, healthy bool) []string {
	sign := "-"
	if healthy {
		sign = "+"
	}
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("c%02d%s", i, sign))
	}
	return out
}

func join(lists ...[]string) []string { return slices.Concat(lists...) }

// quorumStep: at this offset from the start, these checkers send one new
// result each for web, then the table is pushed.
type quorumStep struct {
	at       time.Duration
	frames   []string // checker name and "+" or "-"
	up       bool
	reason   string
	checkers int // Status.Checkers: the quorum's denominator
}

// TestQuorumEdges drives the real aggregator at the edges of the quorum
// and of the hysteresis, with checkers joining and leaving at controlled
// times. Thresholds are 1/1, so each checker's vote is its last result;
// checker_timeout is its default, three push periods (3s).
func TestQuorumEdges(t *testing.T) {
	const timeout = 3 * time.Second
	const eps = time.Nanosecond
	hyst := &config.Hysteresis{Down: 0.2, Up: 0.85}
	cases := []struct {
		name  string
		hyst  *config.Hysteresis
		steps []quorumStep
	}{
		{name: "exactly 18% healthy is not more than 18%", steps: []quorumStep{
			{frames: join(checkers(0, 9, true), checkers(9, 50, false)), up: false, reason: "timeout", checkers: 50},
		}},
		{name: "just above 18% healthy", steps: []quorumStep{
			{frames: join(checkers(0, 9, true), checkers(9, 49, false)), up: true, reason: "timeout", checkers: 49},
		}},
		{name: "zero reporters ever: starts healthy", steps: []quorumStep{
			{up: true, reason: "no_results", checkers: 0},
		}},
		{name: "zero reporters after healthy: stays healthy", steps: []quorumStep{
			{frames: []string{"c00+"}, up: true, reason: "ok", checkers: 1},
			{at: timeout + eps, up: true, reason: "no_results", checkers: 0},
		}},
		{name: "zero reporters after unhealthy: stays unhealthy", steps: []quorumStep{
			{frames: []string{"c00-"}, up: false, reason: "timeout", checkers: 1},
			{at: timeout + eps, up: false, reason: "no_results", checkers: 0},
			{at: time.Hour, up: false, reason: "no_results", checkers: 0},
		}},
		{name: "one reporter, healthy", steps: []quorumStep{
			{frames: []string{"c00-"}, up: false, reason: "timeout", checkers: 1},
			{at: time.Second, frames: []string{"c00+"}, up: true, reason: "ok", checkers: 1},
		}},
		{name: "one reporter, unhealthy", steps: []quorumStep{
			{frames: []string{"c00-"}, up: false, reason: "timeout", checkers: 1},
		}},
		{name: "a joining checker counts from its first frame", steps: []quorumStep{
			// 1 of 5 (20%), then a sixth says unhealthy: 1 of 6 (16.7%).
			{frames: join(checkers(0, 1, true), checkers(1, 5, false)), up: true, reason: "timeout", checkers: 5},
			{at: time.Second, frames: []string{"c05-"}, up: false, reason: "timeout", checkers: 6},
		}},
		{name: "the only healthy checker leaves exactly after checker_timeout", steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 5, false)), up: true, reason: "timeout", checkers: 5},
			{at: 2 * time.Second, frames: checkers(1, 5, false), up: true, reason: "timeout", checkers: 5},
			{at: timeout - eps, up: true, reason: "timeout", checkers: 5},
			{at: timeout, up: true, reason: "timeout", checkers: 5},
			{at: timeout + eps, up: false, reason: "timeout", checkers: 4},
		}},
		{name: "an unhealthy checker leaving brings the share above the quorum", steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 6, false)), up: false, reason: "timeout", checkers: 6},
			{at: 2 * time.Second, frames: join(checkers(0, 1, true), checkers(1, 5, false)), up: false, reason: "timeout", checkers: 6},
			{at: timeout - eps, up: false, reason: "timeout", checkers: 6},
			{at: timeout + eps, up: true, reason: "timeout", checkers: 5},
		}},
		{name: "a checker that left and comes back counts again", steps: []quorumStep{
			{frames: []string{"c00+", "c01-"}, up: true, reason: "timeout", checkers: 2},
			{at: 2 * time.Second, frames: []string{"c01-"}, up: true, reason: "timeout", checkers: 2},
			{at: timeout + eps, up: false, reason: "timeout", checkers: 1},
			{at: 4 * time.Second, frames: []string{"c00+"}, up: true, reason: "timeout", checkers: 2},
		}},
		{name: "every checker leaves at once: the state stays", steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 10, false)), up: false, reason: "timeout", checkers: 10},
			{at: timeout - eps, up: false, reason: "timeout", checkers: 10},
			{at: timeout + eps, up: false, reason: "no_results", checkers: 0},
		}},
		{name: "hysteresis: exactly the down share stays up", hyst: hyst, steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 5, false)), up: true, reason: "timeout", checkers: 5},
		}},
		{name: "hysteresis: below the down share goes down", hyst: hyst, steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 6, false)), up: false, reason: "timeout", checkers: 6},
		}},
		{name: "hysteresis: down to up needs the up share", hyst: hyst, steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 6, false)), up: false, reason: "timeout", checkers: 6},
			// 80%: far above the quorum and the down share, below up.
			{at: time.Second, frames: join(checkers(0, 16, true), checkers(16, 20, false)), up: false, reason: "timeout", checkers: 20},
			// Exactly 85%.
			{at: 2 * time.Second, frames: join(checkers(0, 17, true), checkers(17, 20, false)), up: true, reason: "timeout", checkers: 20},
			// 25%: below up but not below down, so it stays up.
			{at: 3 * time.Second, frames: join(checkers(0, 5, true), checkers(5, 20, false)), up: true, reason: "timeout", checkers: 20},
		}},
		{name: "hysteresis: with nobody heard the state stays", hyst: hyst, steps: []quorumStep{
			{frames: join(checkers(0, 1, true), checkers(1, 6, false)), up: false, reason: "timeout", checkers: 6},
			{at: timeout + eps, up: false, reason: "no_results", checkers: 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newAgg(t, []string{"web"}, tcp(1, 1))
			if c.hyst != nil {
				g.cfg.Aggregation.Hysteresis = c.hyst
				g.a.Reconfigure(g.cfg, g.idx)
			}
			start := g.now
			for k, st := range c.steps {
				g.now = start.Add(st.at)
				for _, f := range st.frames {
					name, healthy := f[:len(f)-1], f[len(f)-1] == '+'
					g.seq[name]++
					g.result(name, "web", g.seq[name], healthy)
				}
				up := g.push("web")
				s := g.status("web")
				if up != st.up || g.reason("web") != st.reason || s.Checkers != st.checkers {
					t.Errorf("step %d (+%v, %d frames): up=%v reason %s checkers %d (%d healthy), want up=%v reason %s checkers %d",
						k, st.at, len(st.frames), up, g.reason("web"), s.Checkers, s.Healthy, st.up, st.reason, st.checkers)
				}
			}
		})
	}
}

// TestAllCheckersLeave: when no checker is heard at all (the aggregator
// is cut off from every prober), each check keeps its last state for as
// long as it lasts, healthy or not; nothing is turned down and nothing
// is logged as a transition.
func TestAllCheckersLeave(t *testing.T) {
	g := newAgg(t, []string{"web", "db", "mail"}, tcp(1, 1), tcp(1, 1), tcp(1, 1))
	for i, name := range []string{"p1", "p2", "p3"} {
		if err := g.frame(name, g.cfg.Hash,
			prober.Entry{Index: g.index["web"], Seq: 1, Healthy: true, Reason: prober.ReasonOK},
			prober.Entry{Index: g.index["db"], Seq: 1, Healthy: false, Reason: prober.ReasonTimeout},
			prober.Entry{Index: g.index["mail"], Seq: 1, Healthy: i == 0, Reason: prober.ReasonOK}); err != nil {
			t.Fatal(err)
		}
	}
	g.push("web")
	want := map[string]bool{"web": true, "db": false, "mail": true}
	events := len(g.log.Events())
	start := g.now
	for _, after := range []time.Duration{3*time.Second + time.Nanosecond, time.Minute, 24 * time.Hour} {
		g.now = start.Add(after)
		g.push("web")
		for id, up := range want {
			if g.up(id) != up || g.reason(id) != "no_results" || g.status(id).Checkers != 0 {
				t.Errorf("%v after the last frame: %s up=%v reason %s checkers %d, want up=%v no_results 0",
					after, id, g.up(id), g.reason(id), g.status(id).Checkers, up)
			}
		}
	}
	if evs := g.log.Events(); len(evs) != events {
		t.Errorf("transitions while no checker was heard: %v", evs[events:])
	}
}

// TestVotes: Statuses lists every checker ever heard from, for every
// check, with the region its last frame carried, its vote after the
// check's thresholds, when it last carried a result for the check, and
// whether the last push counted it (heard within checker_timeout).
func TestVotes(t *testing.T) {
	g := newAgg(t, []string{"web", "db"}, tcp(2, 1), tcp(1, 1))
	g.region["p1"], g.region["p2"], g.region["p4"] = "eu", "us", "ap"
	t0 := g.now
	g.result("p1", "web", 1, false) // one failure of two: still a healthy vote
	g.result("p2", "web", 1, true)
	g.result("p3", "web", 1, true) // no region
	g.result("p4", "db", 1, true)  // never carries web
	g.push("web")
	want := []health.Vote{
		{Checker: "p1", Region: "eu", Healthy: true, Heard: t0, Counted: true},
		{Checker: "p2", Region: "us", Healthy: true, Heard: t0, Counted: true},
		{Checker: "p3", Region: "", Healthy: true, Heard: t0, Counted: true},
		{Checker: "p4", Region: "ap", Healthy: true},
	}
	checkVotes(t, "first push", g.status("web"), want)

	// p1 fails again, from a region renamed since; p3 carries web only in
	// repeats of the result it sent, which still count as hearing it.
	g.now = t0.Add(time.Second)
	g.region["p1"] = "eu-west"
	g.result("p1", "web", 2, false)
	g.result("p3", "web", 1, true)
	g.push("web")
	want[0] = health.Vote{Checker: "p1", Region: "eu-west", Healthy: false, Heard: g.now, Counted: true}
	want[2].Heard = g.now
	checkVotes(t, "second push", g.status("web"), want)

	// p2 is silent: counted up to checker_timeout after its frame, not
	// after.
	g.now = t0.Add(3 * time.Second)
	g.push("web")
	checkVotes(t, "at checker_timeout", g.status("web"), want)
	g.now = g.now.Add(time.Nanosecond)
	g.push("web")
	want[1].Counted = false
	checkVotes(t, "past checker_timeout", g.status("web"), want)
	if s := g.status("web"); s.Checkers != 2 || s.Healthy != 1 || !s.Up {
		t.Errorf("past p2's timeout: checkers %d healthy %d up=%v, want p1 and p3: 2, 1, up", s.Checkers, s.Healthy, s.Up)
	}
	// A vote read between pushes is the last push's.
	g.now = t0.Add(time.Hour)
	checkVotes(t, "between pushes", g.status("web"), want)
}

func checkVotes(t *testing.T, when string, s health.Status, want []health.Vote) {
	t.Helper()
	if fmt.Sprint(s.Votes) != fmt.Sprint(want) {
		t.Errorf("%s: votes\n%v\nwant\n%v", when, s.Votes, want)
	}
	counted := 0
	for _, v := range s.Votes {
		if v.Counted {
			counted++
		}
	}
	if counted != s.Checkers {
		t.Errorf("%s: %d votes counted, Checkers %d", when, counted, s.Checkers)
	}
}

// TestCheckerTimeoutNotInterval: a prober sends every push period the
// latest result of each check, however long the check's interval. A
// result repeated in those frames counts once, and keeps its checker
// heard; a checker silent for longer than checker_timeout leaves the
// quorum even though its check's interval is longer still.
func TestCheckerTimeoutNotInterval(t *testing.T) {
	web, slow := tcp(1, 1), tcp(2, 1)
	web.Interval, slow.Interval = 10*time.Second, 10*time.Second
	g := newAgg(t, []string{"web", "slow"}, web, slow)
	t0 := g.now
	p1 := func(slowSeq uint64) {
		t.Helper()
		if err := g.frame("p1", g.cfg.Hash,
			prober.Entry{Index: g.index["web"], Seq: 1, Healthy: false, Reason: prober.ReasonTimeout},
			prober.Entry{Index: g.index["slow"], Seq: slowSeq, Healthy: false, Reason: prober.ReasonTimeout}); err != nil {
			t.Fatal(err)
		}
	}
	p1(1)
	g.result("p2", "web", 1, true)
	if !g.push("web") {
		t.Fatal("1 of 2 checkers healthy: web down")
	}
	// p1 repeats its results every second; p2's next result is 10s away.
	for k := 1; k <= 9; k++ {
		g.now = t0.Add(time.Duration(k) * time.Second)
		p1(1)
		g.push("web")
		if !g.up("slow") {
			t.Fatalf("after %d frames repeating one failure (unhealthy_threshold 2): slow down", k+1)
		}
		if k != 3 {
			continue
		}
		if !g.up("web") {
			t.Errorf("p2 silent for 3s (checker_timeout): web down")
		}
		g.now = t0.Add(3500 * time.Millisecond)
		g.push("web")
		if s := g.status("web"); s.Up || s.Checkers != 1 {
			t.Errorf("p2 silent for 3.5s, check interval 10s: up=%v checkers %d, want down judged by p1 alone", s.Up, s.Checkers)
		}
	}
	g.now = t0.Add(10 * time.Second)
	p1(2)
	if g.push("slow") {
		t.Error("a second, distinct failure did not take slow down")
	}
}

// TestRegionQuorum: a check with regions counts and lists only the
// votes of checkers in them, whatever the others say; a check without regions
// counts every checker. A checker's region is its latest frame's.
func TestRegionQuorum(t *testing.T) {
	picky := tcp(1, 1)
	picky.Regions = []string{"r1", "r2", "r3"}
	g := newAgg(t, []string{"picky", "any"}, picky, tcp(1, 1))
	r4 := []string{"a", "b", "c", "f", "h", "i"}
	for _, c := range r4 {
		g.region[c] = "r4"
	}
	g.region["d"] = "r1"
	g.region["e"] = "" // no region: votes only on checks open to every region

	vote := func(seq uint64, r4Up, r1Up bool) {
		for _, id := range []string{"picky", "any"} {
			for _, c := range r4 {
				g.result(c, id, seq, r4Up)
			}
			g.result("e", id, seq, r4Up)
			g.result("d", id, seq, r1Up)
		}
	}
	// Six checkers of r4 and one without a region say down, one of r1
	// says up: picky hears only r1.
	vote(1, false, true)
	if !g.push("picky") {
		t.Errorf("picky: down, want up: only r1's checker counts and says up")
	}
	if s := g.status("picky"); s.Checkers != 1 || s.Healthy != 1 {
		t.Errorf("picky: %d checkers, %d healthy, want 1 and 1", s.Checkers, s.Healthy)
	}
	// Checkers outside its regions do not run picky: only d votes.
	if v := g.status("picky").Votes; len(v) != 1 || v[0].Checker != "d" || !v[0].Counted {
		t.Errorf("picky: votes %+v, want d's alone, counted", v)
	}
	if g.up("any") || g.status("any").Checkers != 8 {
		t.Errorf("any: up=%v with %d checkers, want down with all 8 (1 of 8 healthy)", g.up("any"), g.status("any").Checkers)
	}

	// The reverse: r4 says up, r1 down.
	g.now = g.now.Add(time.Second)
	vote(2, true, false)
	if g.push("picky") {
		t.Errorf("picky: up, want down: r1's checker says down and r4's do not count")
	}
	if !g.up("any") {
		t.Errorf("any: down, want up: 7 of 8 healthy")
	}

	// A checker that moves to r2 counts from its next frame.
	g.now = g.now.Add(time.Second)
	g.region["a"] = "r2"
	g.result("a", "picky", 3, true)
	if !g.push("picky") {
		t.Errorf("picky: down, want up: a, now in r2, says up (1 of 2)")
	}
	if s := g.status("picky"); s.Checkers != 2 {
		t.Errorf("picky: %d checkers, want 2 (d of r1, a of r2)", s.Checkers)
	}

	// A reload that gives picky r4 instead of r1 counts the checkers of
	// r4 heard before it, without a new frame.
	cfg := *g.cfg
	moved := *picky
	moved.Regions = []string{"r2", "r3", "r4"}
	cfg.Checks = checksOf([]string{"picky", "any"}, map[string]*config.Check{"picky": &moved, "any": tcp(1, 1)})
	g.reconfigure(&cfg, g.index)
	up := g.push("picky")
	if s := g.status("picky"); !up || s.Checkers != 6 {
		t.Errorf("picky after the reload: up=%v with %d checkers, want up with r2's a and r4's five", up, s.Checkers)
	}
}
