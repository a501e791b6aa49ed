package daemon_test

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/state"
)

// The state tests run real HTTP backends checked every 200 ms, down after
// 3 failures and up after 2 successes, with a push every 100 ms: a check
// that restarted healthy would be answered for at least 600 ms.
const (
	stateInterval  = 200 * time.Millisecond
	statePush      = 100 * time.Millisecond
	stateUnhealthy = 3
	stateHealthy   = 2
)

// stateDir is the state_dir of e's config.
func stateDir(t *testing.T, e *edge) string {
	t.Helper()
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(regexp.MustCompile(`state_dir: (\S+)`).FindSubmatch(cfg)[1])
}

// waitSaved polls the state file until ok says what it holds is right.
func waitSaved(t *testing.T, dir, what string, ok func(state.File) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		f, err := state.Load(dir)
		if err == nil && ok(f) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state file: %s not saved within 3s (%+v, %v)", what, f, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restartAnswering closes e's daemon, runs between, and starts another on
// the same config, while a client queries www without pause through the
// restart and for a while after it: every query must be answered with
// want exactly, so a backend left out before the restart is never
// answered across it. It returns the new daemon, closed at the test's end.
func restartAnswering(t *testing.T, e *edge, want []string, between func()) *daemon.Daemon {
	t.Helper()
	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var mu sync.Mutex
	var wrong []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.env.Client.Do(func() error {
			c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				r, _, err := c.Exchange(q("www.example.test.", dns.TypeA), "198.18.0.2:53")
				sent.Add(1)
				if err != nil {
					failed.Add(1)
				} else if got := addrs(r); !slices.Equal(got, want) {
					mu.Lock()
					wrong = append(wrong, fmt.Sprint(got))
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}()
	time.Sleep(100 * time.Millisecond)
	if err := e.d.Close(); err != nil {
		t.Fatal(err)
	}
	between()
	var d2 *daemon.Daemon
	if err := e.env.Edge.Do(func() (err error) {
		d2, err = daemon.StartWith(e.cfg, daemon.Options{Netns: e.env.Edge.Do})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	// Longer than a check restarted healthy would take to fail again.
	time.Sleep(stateInterval*stateUnhealthy + time.Second)
	close(stop)
	<-done
	if failed.Load() != 0 || len(wrong) != 0 || sent.Load() < 100 {
		t.Fatalf("of %d queries across the restart, %d unanswered and %d answered other than %v: %v",
			sent.Load(), failed.Load(), len(wrong), want, wrong[:min(len(wrong), 5)])
	}
	t.Logf("%d queries across the restart, each answered %v", sent.Load(), want)
	return d2
}

// TestRestartNewLayoutKeepsDeadBackendOut: a backend known dead is never
// answered across a restart that changes the map layout (another
// max_records), whose new maps hold no table to seed from; and the event
// log that says it died survives the restart.
func TestRestartNewLayoutKeepsDeadBackendOut(t *testing.T) {
	e, backends := healthEdge(t, stateInterval, statePush, stateUnhealthy, stateHealthy)
	waitAnswer(t, e, "startup", []string{"198.18.1.1", "198.18.1.2"}, 2*time.Second)
	backends[0].stop()
	waitAnswer(t, e, "backend 1 stopped", []string{"198.18.1.2"}, stateInterval*stateUnhealthy+statePush+time.Second)
	// Saved as it happens, not only at Close: a crash loses nothing.
	waitSaved(t, stateDir(t, e), "web1 down", func(f state.File) bool {
		s, ok := f.Checks["web1"]
		return ok && !s.Up && len(f.Events) > 0
	})

	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	restartAnswering(t, e, []string{"198.18.1.2"}, func() {
		write(t, e.cfg, strings.Replace(string(cfg), "server:\n", "server:\n  max_records: 4096\n", 1))
	})

	var events struct{ Events []api.EventView }
	getAPI(t, e.env, "/api/v1/events", &events)
	if !slices.ContainsFunc(events.Events, func(ev api.EventView) bool {
		return ev.Check == "web1" && ev.To == "unhealthy" && ev.Reason == "refused"
	}) {
		t.Errorf("events after the restart %+v: want web1's fall from before it", events.Events)
	}
}

// TestRestartKeepsAdminDown: a check set down through the API stays down
// across a restart, though its backend is healthy.
func TestRestartKeepsAdminDown(t *testing.T) {
	e, _ := healthEdge(t, stateInterval, statePush, stateUnhealthy, stateHealthy)
	waitAnswer(t, e, "startup", []string{"198.18.1.1", "198.18.1.2"}, 2*time.Second)
	req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/web1/admin", strings.NewReader("down"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.env.Edge.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("admin down: %s", resp.Status)
	}
	waitAnswer(t, e, "web1 set down", []string{"198.18.1.2"}, 2*time.Second)

	restartAnswering(t, e, []string{"198.18.1.2"}, func() {})

	var checks struct{ Checks []api.CheckView }
	getAPI(t, e.env, "/api/v1/checks", &checks)
	for _, c := range checks.Checks {
		if c.ID == "web1" && (c.Admin != "down" || c.Up) {
			t.Errorf("web1 after the restart: %+v, want admin down", c)
		}
	}
}

// TestCorruptStateFile: a state file that does not decode is no reason
// not to serve. The server starts without it, every check healthy and the
// event log empty, and replaces it with a good one.
func TestCorruptStateFile(t *testing.T) {
	e, _ := healthEdge(t, stateInterval, statePush, stateUnhealthy, stateHealthy)
	dir := stateDir(t, e)
	both := []string{"198.18.1.1", "198.18.1.2"}
	waitAnswer(t, e, "startup", both, 2*time.Second)
	restartAnswering(t, e, both, func() {
		if err := os.WriteFile(state.Path(dir), []byte(`{"Version":1,"Checks":{"web1":`), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	var events struct{ Events []api.EventView }
	getAPI(t, e.env, "/api/v1/events", &events)
	if len(events.Events) != 0 {
		t.Errorf("events %+v after a corrupt state file, want none", events.Events)
	}
	waitSaved(t, dir, "a good file", func(f state.File) bool { return len(f.Checks) == 2 })
}
