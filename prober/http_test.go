package prober

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/steadydns/steadydns/controlplane/config"
)

// httpBackend serves the cases of the HTTP tests on ln.
func httpBackend() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "status: all ok\n") })
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "ok but draining\n") // a body match must not rescue a bad status
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusMovedPermanently) })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "nothing here\n") })
	mux.HandleFunc("/late", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", BodyLimit-2), "ok") // the match ends exactly at the limit
	})
	mux.HandleFunc("/toolate", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", BodyLimit-1), "ok") // the match straddles the limit
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "part one, ")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/vhost", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "www.example.test" {
			w.WriteHeader(http.StatusNotFound)
		}
	})
	mux.HandleFunc("/post", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
	return mux
}

// quiet drops the server's complaints about the handshakes the tests break
// on purpose.
var quiet = log.New(io.Discard, "", 0)

func serveHTTP(t *testing.T, ns Netns, addr string, tlsCert *tls.Certificate) netip.AddrPort {
	t.Helper()
	ln := listenTCP(t, ns, addr)
	srv := &http.Server{Handler: httpBackend(), ErrorLog: quiet}
	if tlsCert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	return addrPort(ln.Addr())
}

func TestHTTP(t *testing.T) {
	ap := serveHTTP(t, nil, "127.0.0.1:0", nil)
	status := func(rs ...config.StatusRange) func(*config.Check) {
		return func(c *config.Check) { c.ExpectStatus = rs }
	}
	for _, tc := range []struct {
		name    string
		path    string
		mods    []func(*config.Check)
		healthy bool
		reason  Reason
		detail  string
	}{
		{"200", "/ok", nil, true, ReasonOK, ""},
		{"503", "/down", nil, false, ReasonStatus, "status 503"},
		{"503 with matching body", "/down", []func(*config.Check){func(c *config.Check) { c.ExpectBody = "ok" }}, false, ReasonStatus, "status 503"},
		{"301 in 200-399 is not followed", "/moved", nil, true, ReasonOK, ""},
		{"301 judged by its own code", "/moved", []func(*config.Check){status(config.StatusRange{Lo: 200, Hi: 200})}, false, ReasonStatus, "status 301"},
		{"list 200,301", "/moved", []func(*config.Check){status(config.StatusRange{Lo: 200, Hi: 200}, config.StatusRange{Lo: 301, Hi: 301})}, true, ReasonOK, ""},
		{"404", "/nowhere", nil, false, ReasonStatus, "status 404"},
		{"body has it", "/ok", []func(*config.Check){func(c *config.Check) { c.ExpectBody = "all ok" }}, true, ReasonOK, ""},
		{"body lacks it", "/empty", []func(*config.Check){func(c *config.Check) { c.ExpectBody = "all ok" }}, false, ReasonBodyMismatch, "body mismatch"},
		{"regexp matches", "/ok", []func(*config.Check){func(c *config.Check) { c.ExpectBodyRegexp = regexp.MustCompile(`^status: (all )?ok`) }}, true, ReasonOK, ""},
		{"regexp does not", "/empty", []func(*config.Check){func(c *config.Check) { c.ExpectBodyRegexp = regexp.MustCompile(`^status: `) }}, false, ReasonBodyMismatch, "body mismatch"},
		{"match ends at 5,120 bytes", "/late", []func(*config.Check){func(c *config.Check) { c.ExpectBody = "ok" }}, true, ReasonOK, ""},
		{"match past 5,120 bytes", "/toolate", []func(*config.Check){func(c *config.Check) { c.ExpectBody = "ok" }}, false, ReasonBodyMismatch, "body mismatch"},
		{"chunked body", "/chunked", []func(*config.Check){func(c *config.Check) { c.ExpectBody = "one, ok" }}, true, ReasonOK, ""},
		{"Host header", "/vhost", []func(*config.Check){func(c *config.Check) { c.Host = "www.example.test" }}, true, ReasonOK, ""},
		{"default Host header", "/vhost", nil, false, ReasonStatus, "status 404"},
		{"method", "/post", []func(*config.Check){func(c *config.Check) { c.Method = "POST" }}, true, ReasonOK, ""},
		{"HEAD", "/ok", []func(*config.Check){func(c *config.Check) { c.Method = "HEAD" }}, true, ReasonOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := append([]func(*config.Check){func(c *config.Check) { c.Path = tc.path }}, tc.mods...)
			r := runCheck(t, nil, checkOf("http", ap, mods...))
			expect(t, r, tc.healthy, tc.reason, tc.detail)
			if r.Latency <= 0 {
				t.Errorf("latency %s, want positive", r.Latency)
			}
		})
	}
}

func TestHTTPRefused(t *testing.T) {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	ap := addrPort(ln.Addr())
	ln.Close()
	expect(t, runCheck(t, nil, checkOf("http", ap)), false, ReasonRefused, "connection refused")
}

func TestHTTPS(t *testing.T) {
	cert := selfSigned(t, netip.MustParseAddr("127.0.0.1"))
	ln := listenTCP(t, nil, "127.0.0.1:0")
	var sni atomic.Value
	srv := &http.Server{Handler: httpBackend(), ErrorLog: quiet, TLSConfig: &tls.Config{
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			sni.Store(h.ServerName)
			return &cert, nil
		},
	}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	ap := addrPort(ln.Addr())
	path := func(c *config.Check) { c.Path = "/ok" }
	noVerify := func(c *config.Check) { c.TLSVerify = false }

	t.Run("verify off", func(t *testing.T) {
		expect(t, runCheck(t, nil, checkOf("https", ap, path, noVerify)), true, ReasonOK, "")
	})
	t.Run("verify on", func(t *testing.T) {
		r := runCheck(t, nil, checkOf("https", ap, path))
		expect(t, r, false, ReasonTLSError, "")
		if !strings.Contains(r.Detail, "certificate") {
			t.Errorf("detail %q does not mention the certificate", r.Detail)
		}
	})
	t.Run("status over tls", func(t *testing.T) {
		r := runCheck(t, nil, checkOf("https", ap, noVerify, func(c *config.Check) { c.Path = "/down" }))
		expect(t, r, false, ReasonStatus, "status 503")
	})
	t.Run("SNI", func(t *testing.T) {
		runCheck(t, nil, checkOf("https", ap, path, noVerify, func(c *config.Check) { c.SNI = "backend.test" }))
		if got := sni.Load(); got != "backend.test" {
			t.Errorf("server saw SNI %q, want backend.test", got)
		}
		runCheck(t, nil, checkOf("https", ap, path, noVerify, func(c *config.Check) { c.Host = "www.example.test:8443" }))
		if got := sni.Load(); got != "www.example.test" {
			t.Errorf("server saw SNI %q, want the Host header's name www.example.test", got)
		}
	})
	t.Run("plain http to a tls port", func(t *testing.T) {
		r := runCheck(t, nil, checkOf("http", ap, path))
		expect(t, r, false, ReasonStatus, "status 400")
	})
	t.Run("tls to a plain port", func(t *testing.T) {
		plain := serveHTTP(t, nil, "127.0.0.1:0", nil)
		r := runCheck(t, nil, checkOf("https", plain, path, noVerify))
		expect(t, r, false, ReasonTLSError, "")
	})
}

func TestHTTPRejectsInjection(t *testing.T) {
	ap := netip.MustParseAddrPort("127.0.0.1:80")
	for _, m := range []func(*config.Check){
		func(c *config.Check) { c.Host = "a\r\nX-Evil: 1" },
		func(c *config.Check) { c.Path = "/ HTTP/1.0\r\n" },
	} {
		if _, err := New(checkOf("http", ap, m), netip.Addr{}); err == nil {
			t.Error("New accepted a header-injecting check")
		}
	}
}
