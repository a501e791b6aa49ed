package api

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"sync/atomic"
)

// The status page: static files that hold nothing of the config, whose
// script reads the API with the token the person gives it.
//
//go:embed page
var pageFiles embed.FS

// pageCSP lets the page load its own script and style and talk to its
// own API, and nothing else: no inline script, no other origin, no
// framing by another site.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// isPage says whether path is one of the page's files, which every
// binary serves alike: they need no token, and the data the script
// fetches does.
func isPage(path string) bool {
	name, ok := strings.CutPrefix(path, "/ui/")
	return path == "/" || ok && name != "" && !strings.Contains(name, "/")
}

// pageHandler serves the page at / and its files under /ui/.
func pageHandler() http.Handler {
	sub, err := fs.Sub(pageFiles, "page")
	if err != nil {
		panic(err) // the embedded directory is there by construction
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		files.ServeHTTP(w, r)
	})
}

// TrafficView is what the page turns into rates: /api/v1/traffic, the
// counters since the start by path and outcome, as steadydns_queries_total
// and steadydns_xdp_passed_total count them.
type TrafficView struct {
	XDP      map[string]uint64 `json:"xdp"`      // nil where this host is no edge
	Fallback map[string]uint64 `json:"fallback"` // the fallback's replies by outcome
}

func (m *Metrics) traffic() TrafficView {
	var v TrafficView
	if xdp, err := m.src.XDPOutcomes(); err == nil {
		v.XDP = xdp
	}
	v.Fallback = map[string]uint64{}
	m.fallback.Range(func(k, n any) bool {
		v.Fallback[k.(string)] = n.(*atomic.Uint64).Load()
		return true
	})
	return v
}
