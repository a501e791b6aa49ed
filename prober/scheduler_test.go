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

// TestSchedulerSpreadsStarts runs 100 checks every second. With a spread
// from hashed ids, a 10 ms window sees about one start and the hash of
// these ids puts at most 6 in one; a scheduler that starts checks together
// puts all 100 in one window.
func TestSchedulerSpreadsStarts(t *testing.T) {
	col := newCollector()
	s := NewScheduler(Options{OnResult: col.add})
	defer s.Close()
	if err := s.Update(tcpProbes("c", 100, acceptor(t), time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second + 50*time.Millisecond)
	var starts []time.Time
	for _, rs := range col.take() {
		starts = append(starts, rs[0].Time) // a check with a phase under 50 ms ran twice
	}
	if len(starts) != 100 {
		t.Fatalf("%d of 100 checks ran in the first interval", len(starts))
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && starts[j].Sub(starts[i]) < 10*time.Millisecond; j++ {
			n++
		}
		most = max(most, n)
	}
	if most > 10 {
		t.Errorf("%d checks started within 10 ms, want at most 10", most)
	}
	if span := starts[len(starts)-1].Sub(starts[0]); span < 800*time.Millisecond {
		t.Errorf("starts span %s of the 1 s interval, want at least 800 ms", span)
	}
}

func TestSchedulerRunsOncePerInterval(t *testing.T) {
	col := newCollector()
	s := NewScheduler(Options{OnResult: col.add})
	defer s.Close()
	const iv = 100 * time.Millisecond
	if err := s.Update(tcpProbes("p", 20, acceptor(t), iv)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(iv) // every probe has had its first run
	col.take()
	time.Sleep(10 * iv)
	got := col.take()
	if len(got) != 20 {
		t.Fatalf("%d of 20 checks ran", len(got))
	}
	for id, rs := range got {
		if len(rs) < 9 || len(rs) > 11 {
			t.Errorf("%s ran %d times in 10 intervals, want 10±1", id, len(rs))
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Seq != rs[i-1].Seq+1 {
				t.Errorf("%s: seq %d after %d, want consecutive", id, rs[i].Seq, rs[i-1].Seq)
			}
			// Never twice in one interval; a run the machine's load made
			// late is not the scheduler's fault, and the count above
			// already bounds how late runs fall behind.
			if gap := rs[i].Time.Sub(rs[i-1].Time); gap < iv/2 {
				t.Errorf("%s: runs %s apart, want about %s", id, gap, iv)
			}
			if !rs[i].Healthy {
				t.Errorf("%s: %s %s", id, rs[i].Reason, rs[i].Detail)
			}
		}
	}
}

func TestSchedulerUpdate(t *testing.T) {
	ap := acceptor(t)
	hang := hangingBackend(t)
	before := runtime.NumGoroutine()
	col := newCollector()
	s := NewScheduler(Options{OnResult: col.add})
	const iv = 100 * time.Millisecond

	probes := tcpProbes("a", 50, ap, iv)
	// A check that is in flight most of the time, so Update has to cancel it.
	probes["hung"] = Probe{Index: 100, Spec: checkOf(HTTP, hang, func(c *Spec) {
		c.Interval, c.Timeout = iv, iv
	})}
	if err := s.Update(probes); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * iv)
	if n := runtime.NumGoroutine(); n <= before {
		t.Errorf("%d goroutines with 51 checks, %d before: the checks do not run", n, before)
	}
	first := col.take()

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
	if took := time.Since(start); took > 20*time.Millisecond {
		t.Errorf("Update took %s: it waited for a check in flight instead of cancelling it", took)
	}
	col.take() // delivered before Update returned
	time.Sleep(3 * iv)
	after := col.take()
	if len(after) != 25 {
		t.Errorf("%d checks reported after the update, want 25", len(after))
	}
	for id, rs := range after {
		if _, ok := next[id]; !ok {
			t.Errorf("%s reported after it was removed", id)
			continue
		}
		prev := first[id]
		if len(prev) == 0 {
			t.Errorf("%s: no result before the update", id)
			continue
		}
		if rs[0].Seq <= prev[len(prev)-1].Seq {
			t.Errorf("%s: seq %d after the update, %d before: seqs must keep increasing", id, rs[0].Seq, prev[len(prev)-1].Seq)
		}
	}

	err := s.Update(map[string]Probe{"bad": {Spec: Spec{Type: TCP, Interval: iv}}})
	if want := "scheduling check bad: building tcp checker: timeout must be positive, got 0s"; err == nil || err.Error() != want {
		t.Errorf("Update of a check without a timeout: got error %v, want %q", err, want)
	}
	time.Sleep(2 * iv)
	if got := len(col.take()); got == 0 {
		t.Error("a failed Update stopped the running checks")
	}

	s.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// hangingBackend accepts connections and never answers on them.
func hangingBackend(t *testing.T) netip.AddrPort {
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
	return addrPort(ln.Addr())
}

// TestHangingBackend checks that a backend that accepts and never answers
// times out on time and does not hold up other checks, even with few
// workers.
func TestHangingBackend(t *testing.T) {
	hang := hangingBackend(t)
	timeout := 300 * time.Millisecond
	t.Run("alone", func(t *testing.T) {
		for _, typ := range []Type{HTTP, HTTPS} {
			start := time.Now()
			r := runCheck(t, nil, checkOf(typ, hang, func(c *Spec) { c.Timeout = timeout }))
			took := time.Since(start)
			expect(t, r, false, ReasonTimeout, "timeout")
			if took < timeout || took > timeout+100*time.Millisecond || r.Latency > took {
				t.Errorf("%s: timed out after %s (latency %s), want %s to %s", typ, took, r.Latency, timeout, timeout+100*time.Millisecond)
			}
		}
	})
	t.Run("among others", func(t *testing.T) {
		col := newCollector()
		s := NewScheduler(Options{Workers: 8, OnResult: col.add})
		defer s.Close()
		const iv = 100 * time.Millisecond
		probes := tcpProbes("fast", 10, acceptor(t), iv)
		for i := range 4 {
			id := fmt.Sprint("hung", i)
			probes[id] = Probe{Index: uint32(100 + i), Spec: checkOf(HTTP, hang, func(c *Spec) {
				c.Interval, c.Timeout = 2*iv, 2*iv-10*time.Millisecond
			})}
		}
		if err := s.Update(probes); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * iv)
		col.take()
		time.Sleep(8 * iv)
		for id, rs := range col.take() {
			if id[0] == 'h' {
				for _, r := range rs {
					if r.Reason != ReasonTimeout || r.Latency > probes[id].Spec.Timeout+100*time.Millisecond {
						t.Errorf("%s: %s after %s", id, r.Reason, r.Latency)
					}
				}
				continue
			}
			if len(rs) < 7 {
				t.Errorf("%s ran %d times in 8 intervals", id, len(rs))
			}
			for i := 1; i < len(rs); i++ {
				if gap := rs[i].Time.Sub(rs[i-1].Time); gap > iv+25*time.Millisecond {
					t.Errorf("%s: runs %s apart, want %s: the hung checks delayed it", id, gap, iv)
				}
			}
		}
	})
}
