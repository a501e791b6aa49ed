package daemon_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/state"
)

// The state tests run real HTTP backends checked every stateInterval,
// down after stateUnhealthy failures and up after stateHealthy successes,
// with a push every statePush: a check that restarted healthy would be
// answered for at least stateInterval × stateUnhealthy.
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

// restartAnswering is restartUnderLoad that keeps querying longer than a
// check restarted healthy would take to fail again, with the new daemon
// closed at the test's end.
func restartAnswering(t *testing.T, e *edge, want []string, between func()) {
	t.Helper()
	d2, _ := restartUnderLoad(t, e, want, stateInterval*stateUnhealthy+time.Second, 100, between)
	t.Cleanup(func() { d2.Close() })
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
	resp, err := e.api(t).Do(req)
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

// TestCorruptStateFile: a state file that does not decode stops the
// start with an error naming it, moved aside as it was; a start told to
// reset takes the checks from the pinned table, so web1, set down through
// the API, stays down and out of the answer, though its backend is
// healthy. XDP answers from the pinned maps throughout.
func TestCorruptStateFile(t *testing.T) {
	e, _ := healthEdge(t, stateInterval, statePush, stateUnhealthy, stateHealthy)
	dir := stateDir(t, e)
	waitAnswer(t, e, "startup", []string{"198.18.1.1", "198.18.1.2"}, 2*time.Second)
	admin(t, e, "web1", "down")
	waitAnswer(t, e, "web1 set down", []string{"198.18.1.2"}, 2*time.Second)
	if err := e.d.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt := []byte(`{"Version":1,"Checks":{"web1":`)
	if err := os.WriteFile(state.Path(dir), corrupt, 0o600); err != nil {
		t.Fatal(err)
	}

	start := func(reset bool) (*daemon.Daemon, error) {
		var d *daemon.Daemon
		err := e.env.Edge.Do(func() (err error) {
			d, err = daemon.StartWith(e.cfg, daemon.Options{Netns: e.env.Edge.Do, ResetState: reset})
			return err
		})
		return d, err
	}
	if d, err := start(false); err == nil {
		d.Close()
		t.Fatal("a start over a corrupt state file succeeded")
	} else if !strings.Contains(err.Error(), state.Path(dir)) || !strings.Contains(err.Error(), "unexpected end of JSON input") ||
		!strings.Contains(err.Error(), "--reset-state") {
		t.Fatalf("start over a corrupt state file: %v; want an error naming %s and what is wrong", err, state.Path(dir))
	}
	moved, _ := filepath.Glob(state.Path(dir) + ".corrupt-*")
	if len(moved) != 1 {
		t.Fatalf("moved aside: %v, want one file", moved)
	}
	if b, err := os.ReadFile(moved[0]); err != nil || !bytes.Equal(b, corrupt) {
		t.Errorf("%s holds %q (%v), want the corrupt file as it was", moved[0], b, err)
	}
	if d, err := start(false); err == nil {
		d.Close()
		t.Fatal("a second start, the corrupt file moved aside, succeeded")
	}
	// Nothing runs: XDP answers from the pinned table.
	if got := addrs(e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeA))); !slices.Equal(got, []string{"198.18.1.2"}) {
		t.Errorf("answer with the starts refused: %v, want web1's address left out", got)
	}

	d, err := start(true)
	if err != nil {
		t.Fatalf("start with --reset-state: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	e.d = d
	// Longer than a check forgotten healthy would take to be answered.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		waitAnswer(t, e, "started with --reset-state", []string{"198.18.1.2"}, 0)
		time.Sleep(20 * time.Millisecond)
	}
	var checks struct{ Checks []api.CheckView }
	getAPI(t, e.env, "/api/v1/checks", &checks)
	for _, c := range checks.Checks {
		if c.ID == "web1" && (c.Admin != "down" || c.Up) {
			t.Errorf("web1 after the reset: %+v, want admin down", c)
		}
	}
	// The override is saved again, as the API's.
	waitSaved(t, dir, "web1's override", func(f state.File) bool { return f.Checks["web1"].Admin == "down" })
}
