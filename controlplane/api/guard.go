package api

import (
	"crypto/subtle"
	"net/http"
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

// RequireToken wraps h so that every request but a read (GET, HEAD)
// carries token as "Authorization: Bearer <token>"; others get 401. The
// reads stay open: they show health, which the DNS answers show anyway,
// and Prometheus scrapes them.
func RequireToken(h http.Handler, token string) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="steadydns"`)
			writeError(w, http.StatusUnauthorized, "this request needs the API token (server.api_token_file) as Authorization: Bearer <token>")
			return
		}
		h.ServeHTTP(w, r)
	})
}
