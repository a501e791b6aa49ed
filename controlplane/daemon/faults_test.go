package daemon_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
)

// faultyBackend listens where a backend's HTTP server did and misbehaves
// on every connection in one way, until stopped.
type faultyBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// fault is what a faulty backend does with a connection.
type fault func(c *net.TCPConn)

var faults = []struct {
	name   string
	do     fault
	reason string // of the check's transition to unhealthy
}{
	// Accepts and never replies.
	{"hang", func(*net.TCPConn) {}, "timeout"},
	// Reads the request, then resets the connection.
	{"reset", func(c *net.TCPConn) {
		c.Read(make([]byte, 512))
		c.SetLinger(0)
		c.Close()
	}, "reset"},
	// Reads the request, then sends a valid response a byte at a time,
	// pausing between bytes: each read makes progress, so only the check's own deadline stops it.
	{"trickle", func(c *net.TCPConn) {
		c.Read(make([]byte, 512))
		for _, b := range []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n") {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		io.Copy(io.Discard, c)
	}, "timeout"},
}

func startFaulty(t *testing.T, b *httpBackend, do fault) *faultyBackend {
	t.Helper()
	f := &faultyBackend{}
	if err := b.host.Do(func() (err error) {
		f.ln, err = net.Listen("tcp", net.JoinHostPort(b.host.V4.String(), "80"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := f.ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			f.wg.Add(1)
			go func() { defer f.wg.Done(); do(c.(*net.TCPConn)) }()
		}
	}()
	return f
}

func (f *faultyBackend) stop() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// TestFaultyBackends: a backend that hangs, resets or trickles its reply
// leaves the XDP answer on schedule, within interval × unhealthy_threshold
// + timeout + push period + 1 s, for the reason its checks give; the other
// backend's checks keep their schedule meanwhile, so it never leaves; and
// once healthy again the backend comes back.
func TestFaultyBackends(t *testing.T) {
	const (
		interval  = 200 * time.Millisecond
		timeout   = 150 * time.Millisecond // healthConfig's
		push      = 100 * time.Millisecond
		unhealthy = 3
		healthy   = 2
	)
	e, backends := healthEdge(t, interval, push, unhealthy, healthy)
	both := []string{"198.18.1.1", "198.18.1.2"}
	waitAnswer(t, e, "startup", both, 2*time.Second)
	time.Sleep(3 * interval)
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			began := time.Now()
			backends[0].stop()
			f := startFaulty(t, backends[0], fc.do)
			bound := interval*unhealthy + timeout + push + time.Second
			took := waitAnswer(t, e, fc.name, []string{"198.18.1.2"}, bound)
			t.Logf("a backend that began to %s left the answer after %v (bound %v)", fc.name, took, bound)

			var checks struct{ Checks []api.CheckView }
			getAPI(t, e.env, "/api/v1/checks", &checks)
			// Runs started since the fault began. Both checks share the
			// interval, so web2's count falls behind web1's only if the
			// misbehaving backend held the prober up.
			since := map[string]int{}
			for _, c := range checks.Checks {
				for _, r := range c.Results {
					if r.Time.After(began) {
						since[c.ID]++
					}
				}
			}
			for _, c := range checks.Checks {
				switch {
				case c.ID == "web1" && (c.Up || c.Reason != fc.reason):
					t.Errorf("web1: up %v, reason %q; want down for %s: %+v", c.Up, c.Reason, fc.reason, c)
				case c.ID == "web2" && !c.Up:
					t.Errorf("web2 down while web1's backend misbehaved: %+v", c)
				case len(c.Results) == 0:
					t.Errorf("%s has no results", c.ID)
				case c.ID == "web2" && since["web2"] < since["web1"]-1:
					t.Errorf("web2 ran %d times since the fault began, web1 %d: the prober stalled", since["web2"], since["web1"])
				}
			}

			f.stop()
			backends[0].start(t)
			waitAnswer(t, e, "healthy again", both, interval*healthy+push+time.Second)
		})
	}
}
