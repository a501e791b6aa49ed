package api

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// maxBody bounds a request body: a write takes one word.
const maxBody = 64

// Timeouts of the API's server, so a client that sends slowly or not at
// all, or keeps an idle connection, does not hold a connection and its
// goroutine for longer.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second // a scrape of a large table's metrics takes a while
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
)

// NewServer returns the HTTP server of the API for h, with timeouts and a
// bound on headers.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// Access is who may use the API, and by which names.
type Access struct {
	// WriteToken is what every request but a read (GET, HEAD) needs, as
	// "Authorization: Bearer <token>"; it also serves for reads. Empty
	// refuses every write.
	WriteToken string
	// ReadToken, when set, is what the reads need (or WriteToken), but
	// /healthz, /readyz and the status page's files: a supervisor or a
	// load balancer asks the first without credentials, a browser loads
	// the page before its script has the token, and none tells anything
	// of the config. Empty leaves the reads open.
	ReadToken string
	// Hosts are the names a request's Host may give besides localhost
	// and IP literals: the API's own listen host, server.api_hosts.
	Hosts []string
}

// Guard wraps h with a's checks: the Host first (403), then the token
// (401).
//
// The Host check is against DNS rebinding: a page of the attacker's name
// has the name resolve to the attacker, then to this host, and the
// browser sends the page's requests here as same-origin, Host naming the
// attacker's name. Only names are rebound, so every IP literal is
// accepted (which also covers an API on 0.0.0.0 or [::] reached at any
// of the host's addresses), and names only when listed. The token does
// the rest: a browser adds Authorization to a cross-site request only
// when the page's script sets it, which needs the token and a CORS
// preflight this API never grants.
func Guard(h http.Handler, a Access) http.Handler {
	hosts := map[string]bool{"localhost": true}
	for _, n := range a.Hosts {
		hosts[normalHost(n)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host := requestHost(r.Host); !hosts[host] && !isIP(host) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("host %q is not a name of this API: reach it by IP address or localhost, or list the name in server.api_hosts", host))
			return
		}
		token := bearer(r)
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			if !same(token, a.WriteToken) {
				unauthorized(w, "this request needs the API's write token as Authorization: Bearer <token>: the file server.api_token_file, or api.token in server.state_dir when that is unset")
				return
			}
		case a.ReadToken != "" && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && !isPage(r.URL.Path):
			if !same(token, a.ReadToken) && !same(token, a.WriteToken) {
				unauthorized(w, "this read needs the API's read token (server.api_read_token_file) or its write token as Authorization: Bearer <token>")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="steadydns"`)
	writeError(w, http.StatusUnauthorized, msg)
}

// bearer is the request's bearer token, "" without one. The scheme is
// case-insensitive (RFC 9110); nothing but this header carries a token.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// same compares a token given with the one wanted in time that does not
// depend on where they differ; an empty token never matches.
func same(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// requestHost is a Host header's host: without the port and brackets,
// lowercase, without a final dot.
func requestHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return normalHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func isIP(h string) bool {
	_, err := netip.ParseAddr(h)
	return err == nil
}
