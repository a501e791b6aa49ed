package api_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
)

// serveGuarded serves s's API as the daemon does, behind the token, on a
// real listener, and returns its base URL.
func serveGuarded(t *testing.T, s *server, token string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(api.RequireToken(api.Handler(s, s.metrics), token))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

func send(t *testing.T, method, url, auth, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestToken: writes need the token, reads do not.
func TestToken(t *testing.T) {
	s := newServer(t)
	base := serveGuarded(t, s, "s3cret-token")
	for _, tc := range []struct {
		name, method, path, auth, body string
		code                           int
	}{
		{"admin without a token", http.MethodPut, "/api/v1/checks/web1/admin", "", "down", http.StatusUnauthorized},
		{"admin with a wrong token", http.MethodPut, "/api/v1/checks/web1/admin", "Bearer s3cret-tokeN", "down", http.StatusUnauthorized},
		{"admin with the token, not as bearer", http.MethodPut, "/api/v1/checks/web1/admin", "s3cret-token", "down", http.StatusUnauthorized},
		{"external without a token", http.MethodPut, "/api/v1/checks/ext/external", "", "up", http.StatusUnauthorized},
		{"admin with the token", http.MethodPut, "/api/v1/checks/web1/admin", "Bearer s3cret-token", "down", http.StatusNoContent},
		{"external with the token", http.MethodPut, "/api/v1/checks/ext/external", "Bearer s3cret-token", "up", http.StatusNoContent},
		{"checks without a token", http.MethodGet, "/api/v1/checks", "", "", http.StatusOK},
		{"metrics without a token", http.MethodGet, "/metrics", "", "", http.StatusOK},
	} {
		if code := send(t, tc.method, base+tc.path, tc.auth, tc.body); code != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.code)
		}
	}
	// Only the writes with the token reached the aggregator.
	s.push(t, time.Now())
	var c checks
	s.get(t, "/api/v1/checks", &c)
	if web1 := c.find(t, "web1"); web1.Admin != "down" {
		t.Errorf("web1 after the admin write with the token: %+v", web1)
	}
}

// TestBodyBound: a write's body over 64 bytes is refused whole with 413.
func TestBodyBound(t *testing.T) {
	s := newServer(t)
	base := serveGuarded(t, s, "t")
	if code := send(t, http.MethodPut, base+"/api/v1/checks/web1/admin", "Bearer t", "down"+strings.Repeat(" ", 1<<20)); code != http.StatusRequestEntityTooLarge {
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
	base := serveGuarded(t, newServer(t), "t")
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
