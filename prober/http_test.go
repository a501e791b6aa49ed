package prober

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	status := func(rs ...StatusRange) func(*Spec) {
		return func(c *Spec) { c.ExpectStatus = rs }
	}
	for _, tc := range []struct {
		name    string
		path    string
		mods    []func(*Spec)
		healthy bool
		reason  Reason
		detail  string
	}{
		{"200", "/ok", nil, true, ReasonOK, ""},
		{"503", "/down", nil, false, ReasonStatus, "status 503"},
		{"503 with matching body", "/down", []func(*Spec){func(c *Spec) { c.ExpectBody = "ok" }}, false, ReasonStatus, "status 503"},
		{"301 in 200-399 is not followed", "/moved", nil, true, ReasonOK, ""},
		{"301 judged by its own code", "/moved", []func(*Spec){status(StatusRange{Lo: 200, Hi: 200})}, false, ReasonStatus, "status 301"},
		{"list 200,301", "/moved", []func(*Spec){status(StatusRange{Lo: 200, Hi: 200}, StatusRange{Lo: 301, Hi: 301})}, true, ReasonOK, ""},
		{"404", "/nowhere", nil, false, ReasonStatus, "status 404"},
		{"body has it", "/ok", []func(*Spec){func(c *Spec) { c.ExpectBody = "all ok" }}, true, ReasonOK, ""},
		{"body lacks it", "/empty", []func(*Spec){func(c *Spec) { c.ExpectBody = "all ok" }}, false, ReasonBodyMismatch, "body mismatch"},
		{"regexp matches", "/ok", []func(*Spec){func(c *Spec) { c.ExpectBodyRegexp = regexp.MustCompile(`^status: (all )?ok`) }}, true, ReasonOK, ""},
		{"regexp does not", "/empty", []func(*Spec){func(c *Spec) { c.ExpectBodyRegexp = regexp.MustCompile(`^status: `) }}, false, ReasonBodyMismatch, "body mismatch"},
		{"match ends at 5,120 bytes", "/late", []func(*Spec){func(c *Spec) { c.ExpectBody = "ok" }}, true, ReasonOK, ""},
		{"match past 5,120 bytes", "/toolate", []func(*Spec){func(c *Spec) { c.ExpectBody = "ok" }}, false, ReasonBodyMismatch, "body mismatch"},
		{"chunked body", "/chunked", []func(*Spec){func(c *Spec) { c.ExpectBody = "one, ok" }}, true, ReasonOK, ""},
		{"Host header", "/vhost", []func(*Spec){func(c *Spec) { c.Host = "www.example.test" }}, true, ReasonOK, ""},
		{"default Host header", "/vhost", nil, false, ReasonStatus, "status 404"},
		{"method", "/post", []func(*Spec){func(c *Spec) { c.Method = "POST" }}, true, ReasonOK, ""},
		{"HEAD", "/ok", []func(*Spec){func(c *Spec) { c.Method = "HEAD" }}, true, ReasonOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := append([]func(*Spec){func(c *Spec) { c.Path = tc.path }}, tc.mods...)
			r := runCheck(t, nil, checkOf(HTTP, ap, mods...))
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
	expect(t, runCheck(t, nil, checkOf(HTTP, ap)), false, ReasonRefused, "connection refused")
}

// TestHTTPStatusLineCutShort: a backend that sends part of its status
// line and then stalls fails for a timeout, not for a malformed response:
// the reader hands over the partial line when the deadline cuts the read.
func TestHTTPStatusLineCutShort(t *testing.T) {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Read(make([]byte, 512))
				c.Write([]byte("HTTP/1.1"))
				time.Sleep(time.Second)
			}()
		}
	}()
	for range 5 {
		r := runCheck(t, nil, checkOf(HTTP, addrPort(ln.Addr()), func(s *Spec) { s.Timeout = 100 * time.Millisecond }))
		expect(t, r, false, ReasonTimeout, "timeout")
	}
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
	path := func(c *Spec) { c.Path = "/ok" }
	noVerify := func(c *Spec) { c.TLSVerify = false }

	t.Run("verify off", func(t *testing.T) {
		expect(t, runCheck(t, nil, checkOf(HTTPS, ap, path, noVerify)), true, ReasonOK, "")
	})
	t.Run("verify on", func(t *testing.T) {
		r := runCheck(t, nil, checkOf(HTTPS, ap, path))
		expect(t, r, false, ReasonTLSError, "")
		if !strings.Contains(r.Detail, "certificate") {
			t.Errorf("detail %q does not mention the certificate", r.Detail)
		}
	})
	t.Run("status over tls", func(t *testing.T) {
		r := runCheck(t, nil, checkOf(HTTPS, ap, noVerify, func(c *Spec) { c.Path = "/down" }))
		expect(t, r, false, ReasonStatus, "status 503")
	})
	t.Run("SNI", func(t *testing.T) {
		runCheck(t, nil, checkOf(HTTPS, ap, path, noVerify, func(c *Spec) { c.SNI = "backend.test" }))
		if got := sni.Load(); got != "backend.test" {
			t.Errorf("server saw SNI %q, want backend.test", got)
		}
		runCheck(t, nil, checkOf(HTTPS, ap, path, noVerify, func(c *Spec) { c.Host = "www.example.test:8443" }))
		if got := sni.Load(); got != "www.example.test" {
			t.Errorf("server saw SNI %q, want the Host header's name www.example.test", got)
		}
	})
	t.Run("plain http to a tls port", func(t *testing.T) {
		r := runCheck(t, nil, checkOf(HTTP, ap, path))
		expect(t, r, false, ReasonStatus, "status 400")
	})
	t.Run("tls to a plain port", func(t *testing.T) {
		plain := serveHTTP(t, nil, "127.0.0.1:0", nil)
		r := runCheck(t, nil, checkOf(HTTPS, plain, path, noVerify))
		expect(t, r, false, ReasonTLSError, "")
	})
}

func TestHTTPRejectsInjection(t *testing.T) {
	ap := netip.MustParseAddrPort("127.0.0.1:80")
	for _, m := range []func(*Spec){
		func(c *Spec) { c.Host = "a\r\nX-Evil: 1" },
		func(c *Spec) { c.Path = "/ HTTP/1.0\r\n" },
	} {
		if _, err := New(checkOf(HTTP, ap, m), netip.Addr{}); err == nil {
			t.Error("New accepted a header-injecting check")
		}
	}
}

// connCounter serves the HTTP test backend and counts the connections it
// accepts and the ones that have closed.
type connCounter struct {
	srv            *http.Server
	opened, closed atomic.Int64
}

func serveCounted(t *testing.T, tlsCert *tls.Certificate, idle time.Duration) (*connCounter, netip.AddrPort) {
	t.Helper()
	ln := listenTCP(t, nil, "127.0.0.1:0")
	cc := &connCounter{}
	mux := http.NewServeMux()
	mux.Handle("/", httpBackend())
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, drainLimit+1)) })
	mux.HandleFunc("/bye", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Connection", "close") })
	cc.srv = &http.Server{Handler: mux, ErrorLog: quiet, IdleTimeout: idle, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			cc.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			cc.closed.Add(1)
		}
	}}
	if tlsCert != nil {
		cc.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
		go cc.srv.ServeTLS(ln, "", "")
	} else {
		go cc.srv.Serve(ln)
	}
	t.Cleanup(func() { cc.srv.Close() })
	return cc, addrPort(ln.Addr())
}

// waitFor polls cond for up to a second: the server counts a connection's
// close in its own goroutine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("after 1s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHTTPKeepAlive(t *testing.T) {
	keep := func(c *Spec) { c.KeepAlive = true }
	runs := func(t *testing.T, c Spec, n int, healthy bool, reason Reason) Checker {
		t.Helper()
		ch, err := New(c, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			expect(t, ch.Check(context.Background()), healthy, reason, "")
		}
		return ch
	}
	t.Run("fresh connection per run by default", func(t *testing.T) {
		cc, ap := serveCounted(t, nil, 0)
		runs(t, checkOf(HTTP, ap, func(c *Spec) { c.Path = "/ok" }), 3, true, ReasonOK)
		waitFor(t, "3 connections opened and closed", func() bool { return cc.opened.Load() == 3 && cc.closed.Load() == 3 })
	})
	for _, typ := range []Type{HTTP, HTTPS} {
		t.Run(string(typ)+" keepalive reuses one connection", func(t *testing.T) {
			var cert *tls.Certificate
			if typ == HTTPS {
				c := selfSigned(t, netip.MustParseAddr("127.0.0.1"))
				cert = &c
			}
			cc, ap := serveCounted(t, cert, 0)
			noVerify := func(c *Spec) { c.TLSVerify = false }
			ch := runs(t, checkOf(typ, ap, keep, noVerify, func(c *Spec) { c.Path = "/ok"; c.ExpectBody = "all ok" }), 3, true, ReasonOK)
			// A failing status still leaves the connection reusable.
			runs(t, checkOf(typ, ap, keep, noVerify, func(c *Spec) { c.Path = "/down" }), 2, false, ReasonStatus)
			if got := cc.opened.Load(); got != 2 {
				t.Errorf("%d connections for two checks of several runs each, want 2", got)
			}
			// Closing the checker closes the connection it kept.
			ch.(io.Closer).Close()
			waitFor(t, "the kept connection closed", func() bool { return cc.closed.Load() >= 1 })
		})
	}
	t.Run("server closed the idle connection", func(t *testing.T) {
		cc, ap := serveCounted(t, nil, 50*time.Millisecond)
		ch, err := New(checkOf(HTTP, ap, keep, func(c *Spec) { c.Path = "/ok" }), netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			expect(t, ch.Check(context.Background()), true, ReasonOK, "")
			waitFor(t, "the server closing the idle connection", func() bool { return cc.closed.Load() == cc.opened.Load() })
		}
		if got := cc.opened.Load(); got != 3 {
			t.Errorf("%d connections, want 3: each run finds the last one closed", got)
		}
	})
	t.Run("not reused", func(t *testing.T) {
		for _, path := range []string{"/bye", "/big"} {
			cc, ap := serveCounted(t, nil, 0)
			runs(t, checkOf(HTTP, ap, keep, func(c *Spec) { c.Path = path }), 2, true, ReasonOK)
			waitFor(t, path+": 2 connections opened and closed", func() bool { return cc.opened.Load() == 2 && cc.closed.Load() == 2 })
		}
	})
}

// TestSchedulerClosesKeptConnections: a keepalive check's connection lives
// between runs; removing the check, or changing it, must close it.
func TestSchedulerClosesKeptConnections(t *testing.T) {
	cc, ap := serveCounted(t, nil, 0)
	results := make(chan Result, 100)
	s := NewScheduler(Options{OnResult: func(r Result) { results <- r }})
	defer s.Close()
	probe := func(path string) map[string]Probe {
		c := checkOf(HTTP, ap, func(c *Spec) {
			c.Path, c.KeepAlive = path, true
			c.Interval, c.Timeout = 100*time.Millisecond, 50*time.Millisecond
		})
		return map[string]Probe{"kept": {Spec: c, Index: 1}}
	}
	await := func(n int) {
		t.Helper()
		for range n {
			select {
			case r := <-results:
				expect(t, r, true, ReasonOK, "")
			case <-time.After(time.Second):
				t.Fatal("no result within 1s")
			}
		}
	}
	if err := s.Update(probe("/ok")); err != nil {
		t.Fatal(err)
	}
	await(3)
	if got := cc.opened.Load(); got != 1 {
		t.Errorf("%d connections for 3 runs, want 1", got)
	}
	if err := s.Update(probe("/empty")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the changed check's connection closed", func() bool { return cc.closed.Load() == 1 })
	await(1)
	if err := s.Update(nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed check's connection closed", func() bool { return cc.closed.Load() == 2 && cc.opened.Load() == 2 })
}
