package daemon_test

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// scrape reads the edge's /metrics and returns each sample's value by its
// name and labels as exposed ("name{a=\"b\"}").
func scrape(t testing.TB, e *edge) map[string]float64 {
	t.Helper()
	resp, err := e.env.Edge.HTTPClient().Get("http://127.0.0.1:9153/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// family is the metric name of a sample key.
func family(sample string) string {
	if i := strings.IndexByte(sample, '{'); i >= 0 {
		return sample[:i]
	}
	return sample
}

// TestMetricsOverTheWire: every query sent counts once in
// steadydns_queries_total, whichever path answered it, and every metric
// the Grafana dashboard queries is exported by a running server.
func TestMetricsOverTheWire(t *testing.T) {
	e, _ := healthEdge(t, 200*time.Millisecond, 100*time.Millisecond, 2, 2)

	t.Run("each query counts once", func(t *testing.T) {
		sum := func() float64 {
			var n float64
			for k, v := range scrape(t, e) {
				if family(k) == "steadydns_queries_total" {
					n += v
				}
			}
			return n
		}
		before := sum()
		x0, f0 := e.paths(t)
		const each = 10
		sent := 0
		for range each {
			for _, c := range []struct {
				proto string
				qtype uint16
			}{
				{"udp", dns.TypeA},    // answered in XDP
				{"udp", dns.TypeMX},   // another type: passed to the fallback
				{"udp", dns.TypeAAAA}, // no AAAA set: passed, and NODATA from the fallback
				{"tcp", dns.TypeA},    // TCP: never parsed by XDP
			} {
				e.ask(t, c.proto, "198.18.0.2:53", q("www.example.test.", c.qtype))
				sent++
			}
		}
		x1, f1 := e.paths(t)
		if x1-x0 != each || f1-f0 != 3*each {
			t.Fatalf("xdp answered %d and the fallback %d, want %d and %d: the test no longer covers both paths", x1-x0, f1-f0, each, 3*each)
		}
		if got := sum() - before; got != float64(sent) {
			t.Errorf("sum(steadydns_queries_total) grew by %v for %d queries sent", got, sent)
		}
		if passed := scrape(t, e)[`steadydns_xdp_passed_total{reason="qtype"}`]; passed < each {
			t.Errorf("steadydns_xdp_passed_total{reason=\"qtype\"} is %v, want at least %d", passed, each)
		}
	})

	t.Run("the dashboard's metrics are exported", func(t *testing.T) {
		b, err := os.ReadFile("../../deploy/grafana/steadydns.json")
		if err != nil {
			t.Fatal(err)
		}
		var dash any
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("deploy/grafana/steadydns.json: %v", err)
		}
		names := map[string]bool{}
		metric := regexp.MustCompile(`\b(?:steadydns|go|process)_[a-z0-9_]+`)
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
						for _, n := range metric.FindAllString(s, -1) {
							names[n] = true
						}
					}
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(dash)
		if len(names) < 10 {
			t.Fatalf("the dashboard queries %d metrics: %v", len(names), names)
		}
		// Series with labels appear once observed: the first check results
		// and frames come within a few pushes.
		deadline := time.Now().Add(10 * time.Second)
		for {
			exported := map[string]bool{}
			for k := range scrape(t, e) {
				exported[family(k)] = true
			}
			var missing []string
			for n := range names {
				if !exported[n] {
					missing = append(missing, n)
				}
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the dashboard queries metrics the server does not export: %v", missing)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
