package prober

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// QueryPath is what a metric check appends to its URL: the instant query
// endpoint of the Prometheus HTTP API, which compatible servers share.
const QueryPath = "/api/v1/query"

// metricLimit bounds the response a metric check reads. A query that
// selects more series than this holds is not one a health check wants.
const metricLimit = 4 << 20

// metricChecker asks a Prometheus-compatible API for an instant query. It
// uses net/http's Transport, unlike httpChecker: many checks ask the same
// server, so keeping the connection between runs is the point, and the
// server is the operator's own, not a backend under test.
type metricChecker struct {
	timeout      time.Duration
	endpoint     string // the URL with QueryPath, password redacted: for details
	client       *http.Client
	req          *http.Request // the request without a body, reused by every run
	form         string        // the request's body
	insufficient Insufficient

	mu   sync.Mutex
	last bool // the last metricVerdict the query gave, for InsufficientLastKnown
}

func newMetric(ns Netns, s Spec) (*metricChecker, error) {
	u, err := MetricURL(s.URL)
	if err != nil {
		return nil, err
	}
	if s.Query == "" {
		return nil, errors.New("query is empty")
	}
	if !slices.Contains(Insufficients, s.Insufficient) {
		return nil, fmt.Errorf("unknown insufficient_data %q", s.Insufficient)
	}
	p := probe{ns: ns}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := p.in(func() (err error) {
				c, err = dialer.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		MaxIdleConnsPerHost: 1,
		// Below the idle timeouts of servers and proxies, so that the
		// server seldom closes a connection just as a run reuses it.
		IdleConnTimeout: 60 * time.Second,
	}
	if u.Scheme == "https" {
		// As for https checks: loading the system roots on the first run
		// would time it out.
		roots, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("loading system roots: %w", err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	req, err := http.NewRequest(http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "steadydns-prober")
	return &metricChecker{
		timeout:  s.Timeout,
		endpoint: u.Redacted(),
		client: &http.Client{
			Transport: tr,
			// A redirect would turn the POST into a GET without the query.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		req: req,
		// The server's own timeout stops it evaluating a query no one waits for.
		form:         url.Values{"query": {s.Query}, "timeout": {strconv.FormatFloat(s.Timeout.Seconds(), 'f', -1, 64)}}.Encode(),
		insufficient: s.Insufficient,
		last:         true,
	}, nil
}

// MetricURL parses a metric check's url, the base URL of the API, and
// returns it with QueryPath appended.
func MetricURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		// Without the text, which may hold a password.
		return nil, fmt.Errorf("parsing url: %w", ue.Err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url %q must start with http:// or https://", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("url %q names no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("url %q must not hold a query or fragment", u.Redacted())
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), QueryPath):
		return nil, fmt.Errorf("url %q must be the server's base URL: %s is appended", u.Redacted(), QueryPath)
	}
	u.Path = strings.TrimRight(u.Path, "/") + QueryPath
	u.RawPath = ""
	return u, nil
}

// Close closes the connection kept for the next run. The scheduler calls
// it when the check stops.
func (m *metricChecker) Close() error {
	m.client.CloseIdleConnections()
	return nil
}

func (m *metricChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	v, detail := m.query(ctx)
	if v.reason == ReasonMetricError && ctx.Err() != nil {
		detail = "timeout"
	}
	r := Result{Healthy: v.healthy, Reason: v.reason, Detail: detail, Latency: time.Since(start)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v.reason == ReasonOK || v.reason == ReasonMetricZero {
		m.last = v.healthy
		return r
	}
	switch m.insufficient {
	case InsufficientHealthy:
		r.Healthy = true
	case InsufficientUnhealthy:
		r.Healthy = false
	case InsufficientLastKnown:
		r.Healthy = m.last
	}
	return r
}

// query asks the API once and judges the answer.
func (m *metricChecker) query(ctx context.Context) (metricVerdict, string) {
	req := m.req.WithContext(ctx)
	req.Body = io.NopCloser(strings.NewReader(m.form))
	req.ContentLength = int64(len(m.form))
	resp, err := m.client.Do(req)
	if err != nil {
		_, detail := classify(errors.Unwrap(err)) // past *url.Error's method and URL
		return metricVerdict{reason: ReasonMetricError}, detail
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, metricLimit+1))
	switch {
	case err != nil:
		_, detail := classify(err)
		return metricVerdict{reason: ReasonMetricError}, "reading the response: " + detail
	case len(body) > metricLimit:
		return metricVerdict{reason: ReasonMetricError}, fmt.Sprintf("response over %d bytes", metricLimit)
	}
	v, detail := judgeMetric(body)
	if resp.StatusCode/100 != 2 {
		// The API explains a refused query in its body, with the status.
		if v.reason == ReasonMetricError && strings.HasPrefix(detail, "query failed") {
			return v, fmt.Sprintf("status %d: %s", resp.StatusCode, detail)
		}
		return metricVerdict{reason: ReasonMetricError}, fmt.Sprintf("status %d from %s", resp.StatusCode, m.endpoint)
	}
	return v, detail
}

// metricVerdict is what a response says, before insufficient_data applies.
type metricVerdict struct {
	healthy bool
	reason  Reason // ReasonOK, ReasonMetricZero, ReasonMetricEmpty or ReasonMetricError
}

// queryResponse is the Prometheus API's envelope of an instant query.
type queryResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// series is one element of a vector or matrix result.
type series struct {
	Metric map[string]string `json:"metric"`
	Value  *sample           `json:"value"`  // vector
	Values []sample          `json:"values"` // matrix
}

// sample is [time, "value"]; only the value counts.
type sample struct{ v string }

func (s *sample) UnmarshalJSON(b []byte) error {
	var pair [2]json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	return json.Unmarshal(pair[1], &s.v)
}

// judgeMetric judges an instant query's response body: healthy when the
// result holds samples and none is zero. Vector and matrix results count
// every sample of every series, so a range selector asks for a whole
// window to be non-zero; a scalar is its one sample. An empty result or a
// NaN sample is no data (metric_empty), unless another sample is zero; a
// string result, an error status or a body that does not parse is an
// error (metric_error).
func judgeMetric(body []byte) (metricVerdict, string) {
	var resp queryResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return metricVerdict{reason: ReasonMetricError}, "response is not the API's JSON: " + trim(err.Error())
	}
	if resp.Status != "success" {
		return metricVerdict{reason: ReasonMetricError}, trim(fmt.Sprintf("query failed: %s: %s", resp.ErrorType, resp.Error))
	}
	var all []series
	switch resp.Data.ResultType {
	case "vector", "matrix":
		if err := json.Unmarshal(resp.Data.Result, &all); err != nil {
			return metricVerdict{reason: ReasonMetricError}, "reading the " + resp.Data.ResultType + ": " + trim(err.Error())
		}
	case "scalar":
		var s sample
		if err := json.Unmarshal(resp.Data.Result, &s); err != nil {
			return metricVerdict{reason: ReasonMetricError}, "reading the scalar: " + trim(err.Error())
		}
		all = []series{{Value: &s}}
	default:
		return metricVerdict{reason: ReasonMetricError}, fmt.Sprintf("result type %q, want vector, scalar or matrix", resp.Data.ResultType)
	}
	name := func(s *series) string {
		if resp.Data.ResultType == "scalar" {
			return "the scalar"
		}
		return labels(s.Metric)
	}
	n, nan := 0, -1
	for i := range all {
		ser := &all[i]
		vals := ser.Values
		if ser.Value != nil {
			vals = append(vals, *ser.Value)
		} else if resp.Data.ResultType == "vector" {
			// A native histogram sample carries "histogram", not "value".
			return metricVerdict{reason: ReasonMetricError}, name(ser) + " has no value"
		}
		for _, s := range vals {
			f, err := strconv.ParseFloat(s.v, 64)
			switch {
			case err != nil:
				return metricVerdict{reason: ReasonMetricError}, fmt.Sprintf("%s: value %q is not a number", name(ser), s.v)
			case f == 0:
				return metricVerdict{reason: ReasonMetricZero}, name(ser) + " is 0"
			case math.IsNaN(f) && nan < 0:
				nan = i
			}
			n++
		}
	}
	switch {
	case n == 0:
		return metricVerdict{reason: ReasonMetricEmpty}, "empty result"
	case nan >= 0:
		return metricVerdict{reason: ReasonMetricEmpty}, name(&all[nan]) + " is NaN"
	}
	return metricVerdict{healthy: true, reason: ReasonOK}, ""
}

// labels writes a series as PromQL does: name{k="v",...}, keys sorted.
func labels(m map[string]string) string {
	var b strings.Builder
	b.WriteString(m["__name__"])
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > 0 || b.Len() == 0 {
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(k + "=" + strconv.Quote(m[k]))
		}
		b.WriteByte('}')
	}
	return trim(b.String())
}

// detailLimit keeps a detail short enough for a status line: an API's
// error can quote a whole query.
const detailLimit = 200

func trim(s string) string {
	if len(s) <= detailLimit {
		return s
	}
	return strings.ToValidUTF8(s[:detailLimit], "") + "…"
}
