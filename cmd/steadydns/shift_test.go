package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// shiftConfig has www's answers in regions r1 and r2, and solo's one
// answer in r1. The client, 198.18.0.1, is in neither region, so every
// region ranks the same for it.
const shiftConfig = `server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0}
  geo:
    regions:
      r1: { prefixes: ["198.18.64.0/24"] }
      r2: { prefixes: ["198.18.65.0/24"] }
zones:
  - origin: example.test.
    file: example.test.zone
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, region: r1 }
      - { value: 198.18.1.2, region: r2 }
  - name: solo.example.test.
    type: A
    answers:
      - { value: 198.18.1.3, region: r1 }
aggregation:
  push_interval: 100ms
`

// TestShiftEndToEnd: a shift made through the API of a running `steadydns
// serve` takes r1's answers out of XDP's answers (UDP) and the
// fallback's (TCP), while a set with nothing else fails open; `status`
// and the events show it; it survives a restart; DELETE brings r1 back;
// and a short shift ends by itself.
func TestShiftEndToEnd(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{})
	e := newEdgeHost(t, env, bin, shiftConfig, map[string]string{"example.test.zone": crashZone})
	cfg, stateDir := e.cfg, e.state
	serve := e.serve
	first := serve("first")
	waitServing(t, env)
	token, err := api.ReadToken(filepath.Join(stateDir, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, "http://127.0.0.1:9153"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := env.Edge.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	both := []string{"198.18.1.1", "198.18.1.2"}
	waitBothPaths(t, env, "startup", "www", both)

	if code := call(http.MethodPut, "/api/v1/shifts/r9", `{"duration": "30m", "reason": "x"}`); code != http.StatusNotFound {
		t.Errorf("shifting an unknown region: %d, want 404", code)
	}
	if code := call(http.MethodPut, "/api/v1/shifts/r1", `{"duration": "30m", "reason": "INC-7: r1 packet loss"}`); code != http.StatusNoContent {
		t.Fatalf("shifting r1 away: %d", code)
	}
	waitBothPaths(t, env, "r1 shifted", "www", []string{"198.18.1.2"})
	// Nothing else in solo: it fails open, as when its one answer is down.
	waitBothPaths(t, env, "r1 shifted, solo", "solo", []string{"198.18.1.3"})

	out, err := env.Edge.Command(bin, "status", "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{"traffic shift: r1 shifted away until", "by api client 127.0.0.1: INC-7: r1 packet loss",
		"unhealthy: region r1 is shifted away", "failing open: too few healthy candidates, answered although region r1 is shifted away"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	if evs := shiftEvents(t, env); !slices.Equal(evs, []string{"r1 serving→shifted shifted"}) {
		t.Errorf("events %q, want r1's shift", evs)
	}

	// A restart keeps the shift: the new process pushes it from its
	// state file, push after push.
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	serve("second")
	waitServing(t, env)
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if got := answer(t, env); !slices.Equal(got, []string{"198.18.1.2"}) {
			t.Fatalf("after a restart: answer %v, want r1's left out", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var list struct{ Shifts []api.ShiftView }
	getJSON(t, env, "/api/v1/shifts", &list)
	if len(list.Shifts) != 1 || list.Shifts[0].Region != "r1" || list.Shifts[0].Reason != "INC-7: r1 packet loss" {
		t.Errorf("shifts after a restart: %+v", list.Shifts)
	}

	if code := call(http.MethodDelete, "/api/v1/shifts/r1", ""); code != http.StatusNoContent {
		t.Fatalf("cancelling r1's shift: %d", code)
	}
	waitBothPaths(t, env, "r1 unshifted", "www", both)

	if code := call(http.MethodPut, "/api/v1/shifts/r2", `{"duration": "2s", "reason": "drill"}`); code != http.StatusNoContent {
		t.Fatalf("shifting r2 away: %d", code)
	}
	waitBothPaths(t, env, "r2 shifted", "www", []string{"198.18.1.1"})
	waitBothPaths(t, env, "r2's shift expired", "www", both)
	want := []string{"r1 serving→shifted shifted", "r1 shifted→serving cancelled", "r2 serving→shifted shifted", "r2 shifted→serving expired"}
	if evs := shiftEvents(t, env); !slices.Equal(evs, want) {
		t.Errorf("events %q, want %q", evs, want)
	}
}

// askPath asks for name A over UDP, which XDP answers, or TCP, which the
// fallback does.
func askPath(t *testing.T, env *testenv.Env, proto, name string) []string {
	t.Helper()
	var r *dns.Msg
	if err := env.Client.Do(func() (err error) {
		r, _, err = (&dns.Client{Net: proto, Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion(name+".example.test.", dns.TypeA), "198.18.0.2:53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			got = append(got, a.A.String())
		}
	}
	slices.Sort(got)
	return got
}

// waitBothPaths polls name's answer on both paths until each is want.
func waitBothPaths(t *testing.T, env *testenv.Env, what, name string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		udp, tcp := askPath(t, env, "udp", name), askPath(t, env, "tcp", name)
		if slices.Equal(udp, want) && slices.Equal(tcp, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s answers %v by xdp, %v by the fallback; want %v", what, name, udp, tcp, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getJSON(t *testing.T, env *testenv.Env, path string, v any) {
	t.Helper()
	resp, err := env.Edge.HTTPClient().Get("http://127.0.0.1:9153" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// shiftEvents are the events of shifts, as "region from→to reason".
func shiftEvents(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	var evs struct{ Events []api.EventView }
	getJSON(t, env, "/api/v1/events", &evs)
	var out []string
	for _, e := range evs.Events {
		if e.Region != "" {
			out = append(out, e.Region+" "+e.From+"→"+e.To+" "+e.Reason)
		}
	}
	return out
}
