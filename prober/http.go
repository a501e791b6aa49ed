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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
)

// BodyLimit is how much of a response body a body match searches.
const BodyLimit = 5120

// httpChecker speaks HTTP/1.1 itself over a fresh connection per run rather
// than through net/http's Transport: the Transport pools connections, follows
// redirects unless told otherwise and starts two goroutines per connection,
// none of which a probe wants. net/http still parses the response.
type httpChecker struct {
	probe
	tls    *tls.Config // nil for plain http
	req    []byte      // the whole request, built once
	head   *http.Request
	status []config.StatusRange
	body   []byte // substring to find, or nil
	re     *regexp.Regexp
}

func newHTTP(p probe, c *config.Check) (*httpChecker, error) {
	port := uint16(80)
	if c.Type == "https" {
		port = 443
	}
	host := c.Host
	if host == "" {
		host = p.target.hostPort(port)
	}
	// The request is written verbatim, so a space or line break would
	// smuggle in another header or request.
	if strings.ContainsAny(c.Method+c.Path+host, " \r\n") {
		return nil, fmt.Errorf("method, path and host must not contain spaces or line breaks")
	}
	h := &httpChecker{
		probe:  p,
		req:    fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: steadydns-prober\r\nAccept: */*\r\nConnection: close\r\n\r\n", c.Method, c.Path, host),
		head:   &http.Request{Method: c.Method},
		status: c.ExpectStatus,
		re:     c.ExpectBodyRegexp,
	}
	if c.ExpectBody != "" {
		h.body = []byte(c.ExpectBody)
	}
	if c.Type == "https" {
		h.tls = &tls.Config{
			ServerName:         sni(c, p.target.host),
			InsecureSkipVerify: !c.TLSVerify,
			NextProtos:         []string{"http/1.1"},
		}
		if c.TLSVerify {
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
func sni(c *config.Check, target string) string {
	if c.SNI != "" {
		return c.SNI
	}
	if c.Host != "" {
		if h, _, err := net.SplitHostPort(c.Host); err == nil {
			return h
		}
		return c.Host
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
	c, release, err := h.dial(ctx, "tcp", ap)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer release()
	if h.tls != nil {
		tc := tls.Client(c, h.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			if r := failErr(ctx, start, err); r.Reason != ReasonError {
				return r
			}
			return fail(start, ReasonTLSError, err.Error())
		}
		c = tc
	}
	if _, err := c.Write(h.req); err != nil {
		return failErr(ctx, start, err)
	}
	br := readers.Get().(*bufio.Reader)
	defer readers.Put(br)
	br.Reset(c)
	resp, err := http.ReadResponse(br, h.head)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(start, ReasonError, "connection closed before the response")
		}
		return failErr(ctx, start, err)
	}
	if !slices.ContainsFunc(h.status, func(r config.StatusRange) bool { return r.Contains(resp.StatusCode) }) {
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
