package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

// metricConfig has one record whose answers each follow a metric check of
// the gauge backend 1 exposes, through the Prometheus on backend 2: one
// per insufficient_data, one inverted, and one whose Prometheus never
// answers.
const metricConfig = `server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0} # the test polls one name from one client
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  healthy: { type: metric, url: "http://198.18.1.2:9090", query: 'steadydns_test_up{job="backend"}', insufficient_data: healthy, interval: 500ms, timeout: 400ms, unhealthy_threshold: 1, healthy_threshold: 1 }
  unhealthy: { type: metric, url: "http://198.18.1.2:9090", query: 'steadydns_test_up{job="backend"}', insufficient_data: unhealthy, interval: 500ms, timeout: 400ms, unhealthy_threshold: 1, healthy_threshold: 1 }
  last: { type: metric, url: "http://198.18.1.2:9090", query: 'steadydns_test_up{job="backend"}', interval: 500ms, timeout: 400ms, unhealthy_threshold: 1, healthy_threshold: 1 }
  inverted: { type: metric, url: "http://198.18.1.2:9090", query: 'steadydns_test_up{job="backend"}', insufficient_data: unhealthy, invert: true, interval: 500ms, timeout: 400ms, unhealthy_threshold: 1, healthy_threshold: 1 }
  never: { type: metric, url: "http://198.18.1.2:9091", query: 'steadydns_test_up', interval: 500ms, timeout: 400ms, unhealthy_threshold: 1, healthy_threshold: 1 }
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.11, check: healthy }
      - { value: 198.18.1.12, check: unhealthy }
      - { value: 198.18.1.13, check: last }
      - { value: 198.18.1.14, check: inverted }
      - { value: 198.18.1.15, check: never }
aggregation:
  push_interval: 100ms
`

// TestMetricCheck runs steadydns serve with metric checks against a real
// Prometheus scraping a gauge on a test backend. The gauge at 0 drops the
// answers, at 1 restores them, and without data (the series gone, then
// Prometheus stopped) each check takes its insufficient_data: healthy,
// unhealthy, or last_known, which keeps the last verdict and is healthy
// before any. The API and steadydns status say why.
func TestMetricCheck(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 2})

	// The backend's gauge: "1", "0", or "" for no series at all.
	var gauge atomic.Value
	gauge.Store("1")
	var ln net.Listener
	if err := env.Backends[0].Do(func() (err error) {
		ln, err = net.Listen("tcp", "198.18.1.1:80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "# TYPE steadydns_test_up gauge")
		if v := gauge.Load().(string); v != "" {
			fmt.Fprintln(w, "steadydns_test_up", v)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	prom := testenv.StartPrometheus(t, env.Backends[1], "198.18.1.2:9090", time.Second, "198.18.1.1:80")

	e := newEdgeHost(t, env, bin, metricConfig, map[string]string{"example.test.zone": crashZone})
	cfg := e.cfg
	if out, err := env.Edge.Command(bin, "check", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	e.serve("serve")
	waitServing(t, env)

	// answers polls the record until it answers exactly want.
	answers := func(what string, want ...string) {
		t.Helper()
		var got []string
		deadline := time.Now().Add(30 * time.Second)
		for {
			got = nil
			err := env.Client.Do(func() error {
				r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion("www.example.test.", dns.TypeA), "198.18.0.2:53")
				if err != nil {
					return err
				}
				for _, rr := range r.Answer {
					if a, ok := rr.(*dns.A); ok {
						got = append(got, a.A.String())
					}
				}
				return nil
			})
			slices.Sort(got)
			if err == nil && slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: answers %v (%v), want %v", what, got, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// reasons waits until the checks' states and reasons are want's.
	reasons := func(what string, want map[string]string) {
		t.Helper()
		var got map[string]string
		deadline := time.Now().Add(30 * time.Second)
		for {
			got = map[string]string{}
			var v struct {
				Checks []struct {
					ID      string `json:"id"`
					Healthy bool   `json:"healthy"`
					Reason  string `json:"reason"`
				} `json:"checks"`
			}
			resp, err := env.Edge.HTTPClient().Get("http://127.0.0.1:9153/api/v1/checks")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
			}
			for _, c := range v.Checks {
				if _, ok := want[c.ID]; ok {
					got[c.ID] = fmt.Sprintf("%s %s", map[bool]string{true: "healthy", false: "unhealthy"}[c.Healthy], c.Reason)
				}
			}
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: checks %v (%v), want %v", what, got, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	answers("gauge at 1", "198.18.1.11", "198.18.1.12", "198.18.1.13", "198.18.1.15")
	reasons("gauge at 1", map[string]string{"healthy": "healthy ok", "inverted": "unhealthy ok", "never": "healthy metric_error"})

	gauge.Store("0")
	answers("gauge at 0", "198.18.1.14", "198.18.1.15")
	reasons("gauge at 0", map[string]string{"healthy": "unhealthy metric_zero", "inverted": "healthy metric_zero"})

	gauge.Store("1")
	answers("gauge back at 1", "198.18.1.11", "198.18.1.12", "198.18.1.13", "198.18.1.15")

	// A series gone from the scrape is marked stale: the query's result
	// is empty.
	gauge.Store("0")
	answers("gauge at 0 again", "198.18.1.14", "198.18.1.15")
	gauge.Store("")
	answers("gauge gone after 0", "198.18.1.11", "198.18.1.15")
	reasons("gauge gone after 0", map[string]string{"healthy": "healthy metric_empty", "unhealthy": "unhealthy metric_empty",
		"last": "unhealthy metric_empty", "inverted": "unhealthy metric_empty"})

	gauge.Store("1")
	answers("gauge back", "198.18.1.11", "198.18.1.12", "198.18.1.13", "198.18.1.15")
	if err := prom.Stop(); err != nil {
		t.Fatal(err)
	}
	answers("prometheus stopped after 1", "198.18.1.11", "198.18.1.13", "198.18.1.15")
	want := map[string]string{"healthy": "healthy metric_error", "unhealthy": "unhealthy metric_error",
		"last": "healthy metric_error", "inverted": "unhealthy metric_error"}
	reasons("prometheus stopped", want)

	// steadydns status names each check's reason and its last result's
	// detail.
	out, err := env.Edge.Command(bin, "status", "--api", "127.0.0.1:9153").CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for id, state := range want {
		st, reason, _ := strings.Cut(state, " ")
		line := fmt.Sprintf(`(?m)^%s\s+metric\s+\d+\s+%s\s+%s\s+auto\s+\S+\s+metric_error \(connection refused\) `, id, st, reason)
		if !regexp.MustCompile(line).MatchString(string(out)) {
			t.Errorf("status has no line matching %s:\n%s", line, out)
		}
	}

	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	answers("prometheus restarted", "198.18.1.11", "198.18.1.12", "198.18.1.13", "198.18.1.15")
}
