package daemon_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
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
