package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestObservePanic: /metrics shows steadydns_panics_total for both places
// from the start, and counts each panic the fallback reports under its
// own.
func TestObservePanic(t *testing.T) {
	s := newServer(t)
	s.metrics.ObservePanic("tcp")
	resp, err := http.Get(s.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`steadydns_panics_total{where="tcp"} 1`, `steadydns_panics_total{where="udp"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
