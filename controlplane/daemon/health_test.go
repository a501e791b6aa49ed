package daemon_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

const healthConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  rrl: {rate: 0} # the restart tests ask one name from one client without pause, and count every answer
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: http, target: 198.18.1.1, port: 80, path: /healthz, expect_body: ok, interval: %s, timeout: 150ms, unhealthy_threshold: %d, healthy_threshold: %d }
  web2: { type: http, target: 198.18.1.2, port: 80, path: /healthz, expect_body: ok, interval: %[3]s, timeout: 150ms, unhealthy_threshold: %[4]d, healthy_threshold: %[5]d }
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2, check: web2}]
aggregation:
  push_interval: %s
`

// httpBackend serves /healthz on a backend host until stopped.
type httpBackend struct {
	host *testenv.Host
	srv  *http.Server
}

func (b *httpBackend) start(t testing.TB) {
	t.Helper()
	var ln net.Listener
	if err := b.host.Do(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(b.host.V4.String(), "80"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	b.srv = &http.Server{Handler: mux}
	go b.srv.Serve(ln)
}

func (b *httpBackend) stop() { b.srv.Close() }

// TestHealthDrivesAnswers: real HTTP backends in test hosts; stopping one
// takes it out of the XDP answer within interval × unhealthy_threshold +
// push period + 1 s, and restarting it brings it back within interval ×
// healthy_threshold + push period + 1 s. The events say why.
// healthEdge starts an edge whose two records' checks probe real HTTP
// backends in two backend hosts.
func healthEdge(t testing.TB, interval, push time.Duration, unhealthy, healthy int) (*edge, []*httpBackend) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	backends := []*httpBackend{{host: env.Backends[0]}, {host: env.Backends[1]}}
	for _, b := range backends {
		b.start(t)
		t.Cleanup(b.stop)
	}
	e := serve(t, env, func(link, pins string) string {
		return fmt.Sprintf(healthConfig, link, pins, interval, unhealthy, healthy, push)
	})
	return e, backends
}

// waitAnswer polls the XDP answer until it is want and returns how long
// that took, or fails past limit.
func waitAnswer(t testing.TB, e *edge, what string, want []string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		x0, _ := e.paths(t)
		got := addrs(e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeA)))
		x1, _ := e.paths(t)
		if slices.Equal(got, want) && x1 == x0+1 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: answer %v after %v, want %v from xdp", what, got, limit, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHealthDrivesAnswers(t *testing.T) {
	const (
		interval  = 200 * time.Millisecond
		push      = 100 * time.Millisecond
		unhealthy = 3
		healthy   = 2
	)
	e, backends := healthEdge(t, interval, push, unhealthy, healthy)
	env := e.env
	waitFor := func(what string, want []string, limit time.Duration) time.Duration {
		return waitAnswer(t, e, what, want, limit)
	}
	both := []string{"198.18.1.1", "198.18.1.2"}
	waitFor("startup", both, 2*time.Second)
	time.Sleep(3 * interval) // let the checks settle

	backends[0].stop()
	downBound := interval*unhealthy + push + time.Second
	took := waitFor("backend 1 stopped", []string{"198.18.1.2"}, downBound)
	t.Logf("backend 1 left the answer %v after it stopped (bound %v)", took, downBound)
	if took < interval*(unhealthy-1) {
		t.Errorf("backend 1 left after %v: before %d failed checks could have run", took, unhealthy)
	}

	backends[0].start(t)
	upBound := interval*healthy + push + time.Second
	took = waitFor("backend 1 restarted", both, upBound)
	t.Logf("backend 1 came back %v after it restarted (bound %v)", took, upBound)

	// The health-check log explains both transitions.
	var events struct{ Events []api.EventView }
	getAPI(t, env, "/api/v1/events", &events)
	var down, up *api.EventView
	for i := range events.Events {
		ev := &events.Events[i]
		if ev.Check == "web1" && ev.To == "unhealthy" {
			down = ev
		}
		if ev.Check == "web1" && ev.To == "healthy" {
			up = ev
		}
	}
	if down == nil || down.Reason != "refused" || up == nil || up.Reason != "ok" || !up.Time.After(down.Time) {
		t.Errorf("events %+v: want web1 unhealthy (refused), then healthy (ok)", events.Events)
	}
	var checks struct{ Checks []api.CheckView }
	getAPI(t, env, "/api/v1/checks", &checks)
	for _, c := range checks.Checks {
		if len(c.Results) == 0 || !c.Up || c.Checkers != 1 || len(c.Records) != 1 {
			t.Errorf("check %+v: want healthy, 1 checker, recent results and the record it feeds", c)
		}
	}
}

func getAPI(t testing.TB, env *testenv.Env, path string, v any) {
	t.Helper()
	resp, err := env.Edge.HTTPClient().Get("http://127.0.0.1:9153" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
