package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/controlplane/api"
)

// TestPage: / is the status page and /ui/ its files, each with the
// headers that keep it to its own origin; the script it names is there.
func TestPage(t *testing.T) {
	s := newServer(t)
	for _, c := range []struct{ path, typ, has string }{
		{"/", "text/html; charset=utf-8", `<script src="/ui/app.js" defer></script>`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/api/v1/checks"},
		{"/ui/app.css", "text/css; charset=utf-8", "@media"},
	} {
		resp, err := http.Get(s.http.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != http.StatusOK || h.Get("Content-Type") != c.typ || !strings.Contains(string(body), c.has) {
			t.Errorf("GET %s: %s, %s, want 200, %s and a body with %q", c.path, resp.Status, h.Get("Content-Type"), c.typ, c.has)
		}
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v, want the page's CSP, nosniff and no-referrer", c.path, h)
		}
	}
}

// TestTraffic: the counters the page turns into rates, by path and
// outcome.
func TestTraffic(t *testing.T) {
	s := newServer(t)
	s.metrics.ObserveFallback("noerror", 0)
	s.metrics.ObserveFallback("noerror", 0)
	s.metrics.ObserveFallback("rrl_dropped", 0)
	var v api.TrafficView
	s.get(t, "/api/v1/traffic", &v)
	if v.XDP["answered"] != 5 || v.XDP["qtype"] != 2 || len(v.Fallback) != 2 || v.Fallback["noerror"] != 2 || v.Fallback["rrl_dropped"] != 1 {
		t.Errorf("traffic %+v, want the XDP counters and 2 noerror, 1 rrl_dropped", v)
	}
}
