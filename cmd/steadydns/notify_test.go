package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// notifyConfig posts web1's changes to two webhooks on the client host:
// hook, which a header file authorizes, and up, which takes only
// recoveries.
const notifyConfig = `server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  bpffs: %s
  state_dir: %s
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: http, target: 198.18.1.1, port: 80, path: /healthz, interval: 200ms, timeout: 100ms, unhealthy_threshold: 2, healthy_threshold: 2 }
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2}]
aggregation:
  push_interval: 100ms
notify:
  webhooks:
    - url: http://198.18.0.1:8080/hook
      name: hook
      header_files: { Authorization: hook.auth }
      backoff: 50ms
      events: { records: [www.example.test.] }
    - url: http://198.18.0.1:8080/up
      name: up
      events: { transitions: [up] }
`

// posted is one request a webhook receiver took.
type posted struct {
	path, auth, contentType string
	body                    []byte
}

// hookReceiver is the webhooks' receiver: it answers its first request
// 503, every later one 204, and keeps them all.
type hookReceiver struct {
	mu  sync.Mutex
	got []posted
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	first := len(h.got) == 0
	h.got = append(h.got, posted{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), b})
	h.mu.Unlock()
	if first {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// at lists what path received, in order.
func (h *hookReceiver) at(path string) []posted {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []posted
	for _, p := range h.got {
		if p.path == path {
			out = append(out, p)
		}
	}
	return out
}

// TestNotify: `steadydns serve` posts web1's changes, as its backend is
// stopped and started, to a real HTTP receiver: the exact JSON, again
// after a 503, with the token of a header file, only to the webhooks whose
// filters take them; the events API and `steadydns status` show the same.
func TestNotify(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	e := newEdgeHost(t, env, bin, notifyConfig, map[string]string{"example.test.zone": crashZone, "hook.auth": "Bearer t0ken\n"})
	dir, cfg := e.dir, e.cfg
	rcv := &hookReceiver{}
	var ln net.Listener
	if err := env.Client.Do(func() (err error) {
		ln, err = net.Listen("tcp", "198.18.0.1:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(ln)
	defer srv.Close()

	backend := func() *exec.Cmd {
		return spawn(t, env.Backends[0], dir, "backend", bin, "testenv", "backend", "--listen", "198.18.1.1:80")
	}
	b := backend()
	e.serve("serve")
	waitServing(t, env)
	waitAnswer(t, env, "startup", []string{"198.18.1.1", "198.18.1.2"})

	b.Process.Kill()
	b.Wait()
	waitAnswer(t, env, "backend stopped", []string{"198.18.1.2"})
	waitFor(t, "the down event posted again after the 503", func() bool { return len(rcv.at("/hook")) == 2 })
	backend()
	waitAnswer(t, env, "backend back", []string{"198.18.1.1", "198.18.1.2"})
	waitFor(t, "the up event posted to both webhooks", func() bool { return len(rcv.at("/hook")) == 3 && len(rcv.at("/up")) == 1 })

	var apiEvents struct{ Events []api.EventView }
	getAPI(t, env, "/api/v1/events?check=web1", &apiEvents)
	var checks struct{ Fleet api.FleetView }
	getAPI(t, env, "/api/v1/checks", &checks)
	if len(apiEvents.Events) != 2 {
		t.Fatalf("the events api shows %+v, want web1 down and up", apiEvents.Events)
	}
	hook, up := rcv.at("/hook"), rcv.at("/up")
	for i, want := range []struct {
		got        posted
		from, to   string
		apiEvent   api.EventView
		authorized bool
	}{
		{hook[0], "healthy", "unhealthy", apiEvents.Events[0], true},
		{hook[1], "healthy", "unhealthy", apiEvents.Events[0], true},
		{hook[2], "unhealthy", "healthy", apiEvents.Events[1], true},
		{up[0], "unhealthy", "healthy", apiEvents.Events[1], false},
	} {
		var fields map[string]any
		if err := json.Unmarshal(want.got.body, &fields); err != nil {
			t.Fatalf("post %d: %v: %s", i, err, want.got.body)
		}
		keys := []string{"cell", "check", "detail", "from", "host", "id", "reason", "records", "time", "to"}
		if _, ok := fields["detail"]; !ok {
			keys = slices.DeleteFunc(keys, func(k string) bool { return k == "detail" })
		}
		if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, keys) {
			t.Errorf("post %d has keys %v, want %v", i, got, keys)
		}
		var ev api.EventView
		json.Unmarshal(want.got.body, &ev)
		slot := ev.Time.UnixNano() / int64(100*time.Millisecond)
		if ev.Check != "web1" || ev.From != want.from || ev.To != want.to || !slices.Equal(ev.Records, []string{"www.example.test."}) ||
			ev.Host != checks.Fleet.ID || ev.Cell != "default" || ev.Reason == "" || ev.ID != fmt.Sprintf("web1/%s/%d", want.to, slot) {
			t.Errorf("post %d: %s, want web1 %s → %s of www.example.test. by %s in cell default", i, want.got.body, want.from, want.to, checks.Fleet.ID)
		}
		if ev.ID != want.apiEvent.ID || !ev.Time.Equal(want.apiEvent.Time) || ev.Reason != want.apiEvent.Reason {
			t.Errorf("post %d: %+v, the events api %+v: want the same event", i, ev, want.apiEvent)
		}
		auth := map[bool]string{true: "Bearer t0ken", false: ""}[want.authorized]
		if want.got.auth != auth || want.got.contentType != "application/json" {
			t.Errorf("post %d: Authorization %q, Content-Type %q; want %q, application/json", i, want.got.auth, want.got.contentType, auth)
		}
	}
	metrics := getText(t, env, "/metrics")
	for _, line := range []string{`steadydns_notifications_total{outcome="retried",target="hook"} 1`, `steadydns_notifications_total{outcome="sent",target="hook"} 2`,
		`steadydns_notifications_total{outcome="sent",target="up"} 1`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	out, err := env.Edge.Command(bin, "status", "--config", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "healthy → unhealthy") || !strings.Contains(string(out), "unhealthy → healthy") {
		t.Errorf("status: %v, want both changes listed:\n%s", err, out)
	}
}

// waitFor polls ok until it holds, for at most 20s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
	}
}

// getText reads path of the edge's api.
func getText(t *testing.T, env *testenv.Env, path string) string {
	t.Helper()
	resp, err := env.Edge.HTTPClient().Get("http://127.0.0.1:9153" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return string(b)
}

// getAPI decodes path of the edge's api into v.
func getAPI(t *testing.T, env *testenv.Env, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, env, path)), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
