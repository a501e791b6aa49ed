package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
)

// serveGuarded serves s's API as the daemon does, behind a's checks, on a
// real listener, and returns its base URL.
func serveGuarded(t *testing.T, s *server, a api.Access) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(api.Guard(api.Handler(s, s.metrics), a))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

// request is one request to a guarded API: headers are pairs of name
// and value.
type request struct {
	name, method, path, body string
	header                   []string
	code                     int
}

// send sends r to base and returns the status and the body.
func send(t *testing.T, base string, r request) (int, string) {
	t.Helper()
	req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(r.header); i += 2 {
		if r.header[i] == "Host" {
			req.Host = r.header[i+1]
		} else {
			req.Header.Add(r.header[i], r.header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func sendAll(t *testing.T, base string, rs []request) {
	t.Helper()
	for _, r := range rs {
		if code, body := send(t, base, r); code != r.code {
			t.Errorf("%s: %d %s, want %d", r.name, code, strings.TrimSpace(body), r.code)
		}
	}
}

func auth(token string) []string { return []string{"Authorization", "Bearer " + token} }

// TestToken: every write needs the write token, as a bearer token and in
// no other way, on loopback too; without a read token the reads are open.
func TestToken(t *testing.T) {
	s := newServer(t)
	base := serveGuarded(t, s, api.Access{WriteToken: "s3cret-token"})
	sendAll(t, base, []request{
		{"admin without a token", http.MethodPut, "/api/v1/checks/web1/admin", "down", nil, http.StatusUnauthorized},
		{"admin with a wrong token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth("s3cret-tokeN"), http.StatusUnauthorized},
		{"admin with a prefix of the token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth("s3cret"), http.StatusUnauthorized},
		{"admin with the token, not as bearer", http.MethodPut, "/api/v1/checks/web1/admin", "down", []string{"Authorization", "s3cret-token"}, http.StatusUnauthorized},
		{"admin with the token as basic", http.MethodPut, "/api/v1/checks/web1/admin", "down", []string{"Authorization", "Basic s3cret-token"}, http.StatusUnauthorized},
		{"admin with the token in a cookie", http.MethodPut, "/api/v1/checks/web1/admin", "down", []string{"Cookie", "token=s3cret-token"}, http.StatusUnauthorized},
		{"admin with the token in the query", http.MethodPut, "/api/v1/checks/web1/admin?token=s3cret-token&access_token=s3cret-token", "down", nil, http.StatusUnauthorized},
		{"external without a token", http.MethodPut, "/api/v1/checks/ext/external", "up", nil, http.StatusUnauthorized},
		{"reload without a token", http.MethodPost, "/api/v1/reload", "", nil, http.StatusUnauthorized},
		{"reload as a form post", http.MethodPost, "/api/v1/reload", "a=b", []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnauthorized},
		{"admin with the token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth("s3cret-token"), http.StatusNoContent},
		{"external with the token, scheme in lowercase", http.MethodPut, "/api/v1/checks/ext/external", "up", []string{"Authorization", "bearer s3cret-token"}, http.StatusNoContent},
		{"reload with the token", http.MethodPost, "/api/v1/reload", "", auth("s3cret-token"), http.StatusNoContent},
		{"checks without a token", http.MethodGet, "/api/v1/checks", "", nil, http.StatusOK},
		{"metrics without a token", http.MethodGet, "/metrics", "", nil, http.StatusOK},
	})
	// Only the writes with the token reached the aggregator.
	s.push(t, time.Now())
	var c checks
	s.get(t, "/api/v1/checks", &c)
	if web1 := c.find(t, "web1"); web1.Admin != "down" {
		t.Errorf("web1 after the admin write with the token: %+v", web1)
	}
	// A write refused says what it needs, and how.
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/reload", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	json.NewDecoder(resp.Body).Decode(&e)
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") || !strings.Contains(e.Error, "server.api_token_file") {
		t.Errorf("a refused write: WWW-Authenticate %q, error %q", got, e.Error)
	}
}

// TestNoWriteToken: an empty write token takes no write, not even one
// with an empty bearer token.
func TestNoWriteToken(t *testing.T) {
	base := serveGuarded(t, newServer(t), api.Access{})
	sendAll(t, base, []request{
		{"admin without a token", http.MethodPut, "/api/v1/checks/web1/admin", "down", nil, http.StatusUnauthorized},
		{"admin with an empty token", http.MethodPut, "/api/v1/checks/web1/admin", "down", []string{"Authorization", "Bearer "}, http.StatusUnauthorized},
	})
}

// TestReadToken: with a read token every read but /healthz, /readyz and
// the status page's files needs it or the write token; the read token
// does not write.
func TestReadToken(t *testing.T) {
	s := newServer(t)
	base := serveGuarded(t, s, api.Access{WriteToken: "w-token", ReadToken: "r-token"})
	var rs []request
	for _, path := range []string{"/api/v1/checks", "/api/v1/records", "/api/v1/events", "/metrics", "/api/v1/traffic", "/api/v1/checks/web1/history"} {
		rs = append(rs,
			request{"GET " + path + " without a token", http.MethodGet, path, "", nil, http.StatusUnauthorized},
			request{"HEAD " + path + " without a token", http.MethodHead, path, "", nil, http.StatusUnauthorized},
			request{"GET " + path + " with a wrong token", http.MethodGet, path, "", auth("r-tokeN"), http.StatusUnauthorized},
			request{"GET " + path + " with the read token", http.MethodGet, path, "", auth("r-token"), http.StatusOK},
			request{"GET " + path + " with the write token", http.MethodGet, path, "", auth("w-token"), http.StatusOK})
	}
	s.push(t, time.Now()) // ready
	rs = append(rs,
		request{"healthz without a token", http.MethodGet, "/healthz", "", nil, http.StatusOK},
		request{"readyz without a token", http.MethodGet, "/readyz", "", nil, http.StatusOK},
		request{"the status page without a token", http.MethodGet, "/", "", nil, http.StatusOK},
		request{"the page's script without a token", http.MethodGet, "/ui/app.js", "", nil, http.StatusOK},
		request{"no such page file without a token", http.MethodGet, "/ui/nope.js", "", nil, http.StatusNotFound},
		request{"the page's directory without a token", http.MethodGet, "/ui/", "", nil, http.StatusUnauthorized},
		request{"below the page's files without a token", http.MethodGet, "/ui/a/b", "", nil, http.StatusUnauthorized},
		request{"an unknown path without a token", http.MethodGet, "/api/v1/nope", "", nil, http.StatusUnauthorized},
		request{"admin with the read token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth("r-token"), http.StatusUnauthorized},
		request{"reload with the read token", http.MethodPost, "/api/v1/reload", "", auth("r-token"), http.StatusUnauthorized},
		request{"admin with the write token", http.MethodPut, "/api/v1/checks/web1/admin", "auto", auth("w-token"), http.StatusNoContent})
	sendAll(t, base, rs)
}

// TestHost: a Host that is a name must be localhost, the API's own or
// one of server.api_hosts; any IP literal passes.
func TestHost(t *testing.T) {
	base := serveGuarded(t, newServer(t), api.Access{WriteToken: "t", Hosts: []string{"api.example.test", "Ops.Example.Test."}})
	host := func(h string) []string { return []string{"Host", h} }
	sendAll(t, base, []request{
		{"a name not listed", http.MethodGet, "/api/v1/checks", "", host("evil.example"), http.StatusForbidden},
		{"a name not listed, with its port", http.MethodGet, "/api/v1/checks", "", host("evil.example:9153"), http.StatusForbidden},
		{"a name not listed, on healthz", http.MethodGet, "/healthz", "", host("evil.example"), http.StatusForbidden},
		{"a name not listed, with the token", http.MethodPut, "/api/v1/checks/web1/admin", "down", append(host("evil.example"), auth("t")...), http.StatusForbidden},
		{"a listed name's subdomain", http.MethodGet, "/api/v1/checks", "", host("x.api.example.test"), http.StatusForbidden},
		{"a subdomain of localhost", http.MethodGet, "/api/v1/checks", "", host("evil.localhost"), http.StatusForbidden},
		{"localhost", http.MethodGet, "/api/v1/checks", "", host("localhost"), http.StatusOK},
		{"localhost with a port, in capitals", http.MethodGet, "/api/v1/checks", "", host("LOCALHOST:9153"), http.StatusOK},
		{"a listed name", http.MethodGet, "/api/v1/checks", "", host("api.example.test:9153"), http.StatusOK},
		{"a listed name, written otherwise", http.MethodGet, "/api/v1/checks", "", host("ops.example.test"), http.StatusOK},
		{"a listed name writes with the token", http.MethodPut, "/api/v1/checks/web1/admin", "down", append(host("api.example.test"), auth("t")...), http.StatusNoContent},
		{"IPv4 loopback", http.MethodGet, "/api/v1/checks", "", host("127.0.0.1:9153"), http.StatusOK},
		{"IPv6 loopback", http.MethodGet, "/api/v1/checks", "", host("[::1]:9153"), http.StatusOK},
		{"another address", http.MethodGet, "/api/v1/checks", "", host("198.18.0.2"), http.StatusOK},
	})
	code, body := send(t, base, request{method: http.MethodGet, path: "/api/v1/checks", header: host("evil.example")})
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusForbidden || !strings.Contains(e.Error, "server.api_hosts") || !strings.Contains(e.Error, `"evil.example"`) {
		t.Errorf("a name not listed: %d %s, want 403 with a JSON error naming the host and server.api_hosts", code, body)
	}
}

// TestBodyBound: a write's body over 64 bytes is refused whole with 413.
func TestBodyBound(t *testing.T) {
	s := newServer(t)
	base := serveGuarded(t, s, api.Access{WriteToken: "t"})
	if code, _ := send(t, base, request{method: http.MethodPut, path: "/api/v1/checks/web1/admin", body: "down" + strings.Repeat(" ", 1<<20), header: auth("t")}); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB body: %d, want 413", code)
	}
	var c checks
	s.get(t, "/api/v1/checks", &c)
	if web1 := c.find(t, "web1"); web1.Admin != "auto" {
		t.Errorf("an oversized write changed web1: %+v", web1)
	}
}

// TestSlowHeader: a client that never finishes its request's header is
// cut off by the read-header timeout, 5s.
func TestSlowHeader(t *testing.T) {
	base := serveGuarded(t, newServer(t), api.Access{WriteToken: "t"})
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /api/v1/checks HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	_, err = io.ReadAll(c)
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open after %s", took)
	}
	if took < 4*time.Second || took > 7*time.Second {
		t.Errorf("closed after %s, want about 5s", took)
	}
}
