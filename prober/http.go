package prober

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BodyLimit is how much of a response body a body match searches.
const BodyLimit = 5120

// drainLimit is how much of a body past BodyLimit a keepalive check reads
// to reuse its connection; a longer body closes it.
const drainLimit = 64 << 10

// httpChecker speaks HTTP/1.1 itself rather than through net/http's
// Transport: the Transport pools connections, follows redirects unless told
// otherwise and starts two goroutines per connection, none of which a probe
// wants. net/http still parses the response. Each run uses a fresh
// connection, or with keepalive the one the last run left open.
type httpChecker struct {
	probe
	tls    *tls.Config // nil for plain http
	req    []byte      // the whole request, built once
	head   *http.Request
	status []StatusRange
	body   []byte // substring to find, or nil
	re     *regexp.Regexp
	keep   bool

	mu   sync.Mutex
	idle net.Conn // keepalive: the connection the last run left open
}

func newHTTP(p probe, s Spec) (*httpChecker, error) {
	port := uint16(80)
	if s.Type == HTTPS {
		port = 443
	}
	host := s.Host
	if host == "" {
		host = p.target.hostPort(port)
	}
	// The request is written verbatim, so a space or line break would
	// smuggle in another header or request.
	if strings.ContainsAny(s.Method+s.Path+host, " \r\n") {
		return nil, fmt.Errorf("method, path and host must not contain spaces or line breaks")
	}
	connection := "close"
	if s.KeepAlive {
		connection = "keep-alive"
	}
	h := &httpChecker{
		probe:  p,
		req:    fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: steadydns-prober\r\nAccept: */*\r\nConnection: %s\r\n\r\n", s.Method, s.Path, host, connection),
		head:   &http.Request{Method: s.Method},
		status: s.ExpectStatus,
		re:     s.ExpectBodyRegexp,
		keep:   s.KeepAlive,
	}
	if s.ExpectBody != "" {
		h.body = []byte(s.ExpectBody)
	}
	if s.Type == HTTPS {
		h.tls = &tls.Config{
			ServerName:         sni(s, p.target.host),
			InsecureSkipVerify: !s.TLSVerify,
			NextProtos:         []string{"http/1.1"},
		}
		if s.TLSVerify {
			// Loading the system roots takes long enough to time out the
			// first check, so it is done here, once per process.
			roots, err := x509.SystemCertPool()
			if err != nil {
				return nil, fmt.Errorf("loading system roots: %w", err)
			}
			h.tls.RootCAs = roots
		}
	}
	return h, nil
}

// sni picks the TLS server name: SNI, else the Host header's name, else the
// target. crypto/tls leaves an IP address out of the handshake but still
// verifies the certificate against it.
func sni(s Spec, target string) string {
	if s.SNI != "" {
		return s.SNI
	}
	if s.Host != "" {
		if h, _, err := net.SplitHostPort(s.Host); err == nil {
			return h
		}
		return s.Host
	}
	return target
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	bodies  = sync.Pool{New: func() any { return new([BodyLimit]byte) }}
)

func (h *httpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel, ap, err := h.begin(ctx)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer cancel()
	if c := h.take(); c != nil {
		r, retry := h.exchange(ctx, start, c, true)
		if !retry {
			return r
		}
		// The server closed the idle connection before this run's request
		// reached it, which it may do at any time: ask again on a new one.
	}
	c, err := h.open(ctx, ap)
	if err != nil {
		return failOpen(ctx, start, err)
	}
	r, _ := h.exchange(ctx, start, c, false)
	return r
}

// take returns the connection the last run left open, or nil.
func (h *httpChecker) take() net.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.idle
	h.idle = nil
	return c
}

// Close closes a connection kept for the next run. The scheduler calls it
// when the check stops.
func (h *httpChecker) Close() error {
	if c := h.take(); c != nil {
		return c.Close()
	}
	return nil
}

// open connects to ap and does the TLS handshake for https.
func (h *httpChecker) open(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	c, err := h.connect(ctx, "tcp", ap)
	if err != nil {
		return nil, err
	}
	if h.tls == nil {
		return c, nil
	}
	tc := tls.Client(c, h.tls)
	stop := bound(ctx, c)
	err = tc.HandshakeContext(ctx)
	if !stop() && err == nil {
		err = ctx.Err() // done just as the run ended: the deadline expired the conn
	}
	if err != nil {
		c.Close()
		return nil, handshakeError{err}
	}
	return tc, nil
}

// handshakeError marks a failed TLS handshake.
type handshakeError struct{ err error }

func (e handshakeError) Error() string { return e.err.Error() }
func (e handshakeError) Unwrap() error { return e.err }

// failOpen judges a failure to connect: a handshake that failed for any
// reason but a timeout or a dead connection is a TLS error.
func failOpen(ctx context.Context, start time.Time, err error) Result {
	r := failErr(ctx, start, err)
	var he handshakeError
	if r.Reason == ReasonError && errors.As(err, &he) {
		return fail(start, ReasonTLSError, err.Error())
	}
	return r
}

// bound sets c's deadline from ctx and expires it at once should ctx be
// cancelled first. stop reports false if ctx ended meanwhile; otherwise it
// clears the deadline, so c can wait idle for the next run.
func bound(ctx context.Context, c net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	after := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return func() bool {
		if !after() || ctx.Err() != nil {
			return false
		}
		c.SetDeadline(time.Time{})
		return true
	}
}

// exchange sends the request on c and judges the response. With keepalive,
// c is kept for the next run when the response was read to its end and
// the server did not ask to close. retry reports that a reused connection
// failed before any byte of a response arrived, so the run may try again
// on a new one.
func (h *httpChecker) exchange(ctx context.Context, start time.Time, c net.Conn, reused bool) (r Result, retry bool) {
	keep := false
	stop := bound(ctx, c)
	defer func() {
		if stop() && keep {
			h.park(c)
			return
		}
		c.Close()
	}()
	if _, err := c.Write(h.req); err != nil {
		return failErr(ctx, start, err), reused && ctx.Err() == nil
	}
	br := readers.Get().(*bufio.Reader)
	defer readers.Put(br)
	br.Reset(c)
	if reused {
		if _, err := br.Peek(1); err != nil && ctx.Err() == nil {
			return Result{}, true
		}
	}
	resp, err := http.ReadResponse(br, h.head)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(start, ReasonError, "connection closed before the response"), false
		}
		return failErr(ctx, start, err), false
	}
	r = h.judge(ctx, start, resp)
	// A connection is reused only from a known state: the whole body read
	// and nothing after it.
	if h.keep && !resp.Close {
		n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		keep = err == nil && n < drainLimit && br.Buffered() == 0
	}
	return r, false
}

// judge checks the status, then the start of the body.
func (h *httpChecker) judge(ctx context.Context, start time.Time, resp *http.Response) Result {
	if !slices.ContainsFunc(h.status, func(r StatusRange) bool { return r.Contains(resp.StatusCode) }) {
		return fail(start, ReasonStatus, "status "+strconv.Itoa(resp.StatusCode))
	}
	if h.body == nil && h.re == nil {
		return pass(start)
	}
	buf := bodies.Get().(*[BodyLimit]byte)
	defer bodies.Put(buf)
	n, err := io.ReadFull(resp.Body, buf[:])
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return failErr(ctx, start, err)
	}
	if h.body != nil && !bytes.Contains(buf[:n], h.body) || h.re != nil && !h.re.Match(buf[:n]) {
		return fail(start, ReasonBodyMismatch, "body mismatch")
	}
	return pass(start)
}

// park keeps c for the next run, or closes it if another run parked one
// first.
func (h *httpChecker) park(c net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle != nil {
		c.Close()
		return
	}
	h.idle = c
}
