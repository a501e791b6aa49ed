package prober

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// acceptor is a TCP backend that accepts and closes every connection.
func acceptor(t *testing.T) netip.AddrPort {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return addrPort(ln.Addr())
}

// collector gathers results by check id.
type collector struct {
	mu   sync.Mutex
	byID map[string][]Result
}

func newCollector() *collector { return &collector{byID: map[string][]Result{}} }

func (c *collector) add(r Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[r.ID] = append(c.byID[r.ID], r)
}

func (c *collector) take() map[string][]Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.byID
	c.byID = map[string][]Result{}
	return out
}

// tcpProbes makes n tcp probes named prefix0…, to ap, every interval.
func tcpProbes(prefix string, n int, ap netip.AddrPort, interval time.Duration) map[string]Probe {
	ps := map[string]Probe{}
	for i := range n {
		c := checkOf(TCP, ap, func(c *Spec) { c.Interval, c.Timeout = interval, interval/2 })
		ps[fmt.Sprintf("%s%d", prefix, i)] = Probe{Spec: c, Index: uint32(len(ps) + 1)}
	}
	return ps
}

func TestPhase(t *testing.T) {
	for _, iv := range []time.Duration{100 * time.Millisecond, time.Second, time.Minute} {
		for i := range 1000 {
			id := fmt.Sprint("check-", i)
			p := Phase(id, iv)
			if p < 0 || p >= iv || p != Phase(id, iv) {
				t.Fatalf("Phase(%q, %s) = %s: not in [0, %s) or not deterministic", id, iv, p, iv)
			}
		}
	}
}

// waitResults takes results from col until enough reports true of all
// taken so far, or fails t after limit. The limit is for a scheduler that
// stopped: a loaded machine is slow, not that slow.
func waitResults(t *testing.T, col *collector, limit time.Duration, enough func(map[string][]Result) bool) map[string][]Result {
	t.Helper()
	got := map[string][]Result{}
	deadline := time.Now().Add(limit)
	for {
		for id, rs := range col.take() {
			got[id] = append(got[id], rs...)
		}
		if enough(got) {
			return got
		}
		if time.Now().After(deadline) {
			counts := map[string]int{}
			for id, rs := range got {
				counts[id] = len(rs)
			}
			t.Fatalf("results after %v: %v", limit, counts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// each reports whether every one of ids has at least n results.
func each(ids []string, n int) func(map[string][]Result) bool {
	return func(got map[string][]Result) bool {
		for _, id := range ids {
			if len(got[id]) < n {
				return false
			}
		}
		return true
	}
}

func idsOf(probes map[string]Probe, prefix string) []string {
	var ids []string
	for id := range probes {
		if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
			ids = append(ids, id)
		}
	}
	return ids
}

// late is how far past its phase's grid a run of check id started, from
// the scheduler's origin. A run never starts before its phase.
func late(t *testing.T, s *Scheduler, id string, every time.Duration, r Result) time.Duration {
	t.Helper()
	at := r.Time.Sub(s.origin) - Phase(id, every)
	if at < 0 {
		t.Errorf("%s started %v before its phase", id, -at)
		return 0
	}
	return at % every
}

// TestSchedulerSpreadsStarts runs 100 checks every second. Each starts at
// its phase, a hash of its id, and the phases of these ids put at most 6
// of 100 in any 10 ms; a scheduler that starts checks together starts
// them before their phase or well past it. The median bounds the spread;
// the worst only catches a start that ignored its phase, so that a
// loaded machine's stray delay does not decide.
func TestSchedulerSpreadsStarts(t *testing.T) {
	const iv = time.Second
	probes := tcpProbes("c", 100, acceptor(t), iv)
	ids := idsOf(probes, "c")
	var phases []time.Duration
	for _, id := range ids {
		phases = append(phases, Phase(id, iv))
	}
	slices.Sort(phases)
	for i := range phases {
		n := 0
		for j := i; j < len(phases) && phases[j]-phases[i] < 10*time.Millisecond; j++ {
			n++
		}
		if n > 6 {
			t.Fatalf("%d phases within 10 ms from %v: the ids do not spread", n, phases[i])
		}
	}

	col := newCollector()
	s := NewScheduler(Options{OnResult: col.add})
	defer s.Close()
	if err := s.Update(probes); err != nil {
		t.Fatal(err)
	}
	got := waitResults(t, col, 10*iv, each(ids, 1))
	var lates []time.Duration
	for _, id := range ids {
		lates = append(lates, late(t, s, id, iv, got[id][0]))
	}
	slices.Sort(lates)
	median, worst := lates[len(lates)/2], lates[len(lates)-1]
	t.Logf("the first runs of 100 checks started %v past their phase in the median, %v at worst", median, worst)
	if median > iv/20 || worst > iv/2 {
		t.Errorf("first runs started %v past their phase in the median, %v at worst; want within %v and %v", median, worst, iv/20, iv/2)
	}
}

// TestSchedulerRunsOncePerInterval: the n-th run of a check never starts
// before the n-th interval of its grid, whatever the machine's load, so
// it never runs twice in one; seqs are consecutive; and a check runs in
// most of the intervals it spans: a load that holds a run up past its
// interval costs that run, which the scheduler skips rather than make up.
func TestSchedulerRunsOncePerInterval(t *testing.T) {
	col := newCollector()
	s := NewScheduler(Options{OnResult: col.add})
	defer s.Close()
	const iv = 100 * time.Millisecond
	probes := tcpProbes("p", 20, acceptor(t), iv)
	if err := s.Update(probes); err != nil {
		t.Fatal(err)
	}
	got := waitResults(t, col, 100*iv, each(idsOf(probes, "p"), 11))
	for id, rs := range got {
		phase := Phase(id, iv)
		for i, r := range rs {
			if at, slot := r.Time.Sub(s.origin), phase+time.Duration(i)*iv; at < slot {
				t.Errorf("%s: run %d started at %v, before its interval began at %v: twice in one interval", id, i, at, slot)
			}
			if i > 0 && r.Seq != rs[i-1].Seq+1 {
				t.Errorf("%s: seq %d after %d, want consecutive", id, r.Seq, rs[i-1].Seq)
			}
			if !r.Healthy {
				t.Errorf("%s: %s %s", id, r.Reason, r.Detail)
			}
		}
		// A scheduler that ran every other interval would run in half.
		first, last := rs[0].Time.Sub(s.origin)-phase, rs[len(rs)-1].Time.Sub(s.origin)-phase
		if spanned := int(last/iv - first/iv + 1); len(rs) < spanned*2/3 {
			t.Errorf("%s ran %d times in the %d intervals from its first run to its last", id, len(rs), spanned)
		}
	}
}

func TestSchedulerUpdate(t *testing.T) {
	ap := acceptor(t)
	hang, accepted := hangingBackend(t)
	before := runtime.NumGoroutine()
	col := newCollector()
	s := NewScheduler(Options{OnResult: col.add})
	const iv = 100 * time.Millisecond

	probes := tcpProbes("a", 50, ap, iv)
	// A check in flight for the rest of the test once it starts, so that
	// Update has to cancel it: waiting for it would take its timeout.
	const hungTimeout = time.Minute
	probes["hung"] = Probe{Index: 100, Spec: checkOf(HTTP, hang, func(c *Spec) {
		c.Interval, c.Timeout = iv, hungTimeout
	})}
	if err := s.Update(probes); err != nil {
		t.Fatal(err)
	}
	first := waitResults(t, col, 100*iv, each(idsOf(probes, "a"), 1))
	for deadline := time.Now().Add(100 * iv); accepted() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hung check never connected")
		}
	}
	if n := runtime.NumGoroutine(); n <= before {
		t.Errorf("%d goroutines with 51 checks, %d before: the checks do not run", n, before)
	}
	for id, rs := range col.take() {
		first[id] = append(first[id], rs...)
	}

	// Keep a0-a24, change a0-a4, drop a25-a49 and the hung check.
	next := map[string]Probe{}
	for i := range 25 {
		id := fmt.Sprint("a", i)
		p := probes[id]
		if i < 5 {
			p.Spec.Timeout = iv / 4
		}
		next[id] = p
	}
	start := time.Now()
	if err := s.Update(next); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("Update took %v with a check in flight", took)
	if took > hungTimeout/20 {
		t.Errorf("Update took %s: it waited for a check in flight instead of cancelling it", took)
	}
	for id, rs := range col.take() { // delivered before Update returned
		first[id] = append(first[id], rs...)
	}
	after := waitResults(t, col, 100*iv, func(got map[string][]Result) bool {
		for id := range got {
			if _, ok := next[id]; !ok {
				return true // reported below
			}
		}
		return each(idsOf(next, "a"), 1)(got)
	})
	for id, rs := range after {
		if _, ok := next[id]; !ok {
			t.Errorf("%s reported after it was removed", id)
			continue
		}
		prev := first[id]
		if rs[0].Seq <= prev[len(prev)-1].Seq {
			t.Errorf("%s: seq %d after the update, %d before: seqs must keep increasing", id, rs[0].Seq, prev[len(prev)-1].Seq)
		}
	}

	err := s.Update(map[string]Probe{"bad": {Spec: Spec{Type: TCP, Interval: iv}}})
	if want := "scheduling check bad: building tcp checker: timeout must be positive, got 0s"; err == nil || err.Error() != want {
		t.Errorf("Update of a check without a timeout: got error %v, want %q", err, want)
	}
	col.take()
	waitResults(t, col, 100*iv, func(got map[string][]Result) bool { return len(got) > 0 }) // the running checks go on

	s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// hangingBackend accepts connections and never answers on them; accepted
// counts the connections so far.
func hangingBackend(t *testing.T) (ap netip.AddrPort, accepted func() int) {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return addrPort(ln.Addr()), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}
}

// TestHangingBackend checks that a backend that accepts and never answers
// times out on time and does not hold up other checks, even with few
// workers. A check that let its timeout run twice over (once to connect,
// once to read) takes twice as long: the bound on the verdict's time is
// that, not the machine's load.
func TestHangingBackend(t *testing.T) {
	hang, accepted := hangingBackend(t)
	timeout := 300 * time.Millisecond
	t.Run("alone", func(t *testing.T) {
		for _, typ := range []Type{HTTP, HTTPS} {
			start := time.Now()
			r := runCheck(t, nil, checkOf(typ, hang, func(c *Spec) { c.Timeout = timeout }))
			took := time.Since(start)
			expect(t, r, false, ReasonTimeout, "timeout")
			t.Logf("%s: timed out after %v (latency %v), timeout %v", typ, took, r.Latency, timeout)
			if took < timeout || took >= 2*timeout || r.Latency > took {
				t.Errorf("%s: timed out after %s (latency %s), want %s to %s", typ, took, r.Latency, timeout, 2*timeout)
			}
		}
	})
	t.Run("among others", func(t *testing.T) {
		col := newCollector()
		// Four workers for the hung checks, one for the ten others.
		s := NewScheduler(Options{Workers: 5, OnResult: col.add})
		defer s.Close()
		const iv = 100 * time.Millisecond
		// The hung checks are in flight all along: each starts again at
		// its first slot after it times out.
		const hungTimeout = time.Second
		probes := tcpProbes("fast", 10, acceptor(t), iv)
		for i := range 4 {
			id := fmt.Sprint("hung", i)
			probes[id] = Probe{Index: uint32(100 + i), Spec: checkOf(HTTP, hang, func(c *Spec) {
				c.Interval, c.Timeout = iv, hungTimeout
			})}
		}
		before := accepted()
		if err := s.Update(probes); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(100 * iv); accepted() < before+4; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of 4 hung checks connected", accepted()-before)
			}
		}
		col.take()
		// Every hung check timed out at least once meanwhile, so for a
		// whole timeout all four held a worker.
		got := waitResults(t, col, 20*hungTimeout, func(got map[string][]Result) bool {
			return each(idsOf(probes, "hung"), 1)(got) && each(idsOf(probes, "fast"), 10)(got)
		})
		var worst time.Duration
		for id, rs := range got {
			if id[0] == 'h' {
				for _, r := range rs {
					if r.Reason != ReasonTimeout || r.Latency < hungTimeout || r.Latency >= 2*hungTimeout {
						t.Errorf("%s: %s after %s, timeout %v", id, r.Reason, r.Latency, hungTimeout)
					}
				}
				continue
			}
			for i := 1; i < len(rs); i++ {
				if rs[i].Seq != rs[i-1].Seq+1 {
					t.Errorf("%s: seq %d after %d, want consecutive", id, rs[i].Seq, rs[i-1].Seq)
				}
				gap := rs[i].Time.Sub(rs[i-1].Time)
				worst = max(worst, gap)
				// Waiting on a hung check would hold a run up for most
				// of its timeout.
				if gap >= iv+hungTimeout/2 {
					t.Errorf("%s: runs %s apart, want %s: the hung checks delayed it", id, gap, iv)
				}
			}
		}
		t.Logf("runs beside four hung checks at most %v apart, interval %v", worst, iv)
	})
}
