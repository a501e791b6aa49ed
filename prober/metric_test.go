package prober

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestJudgeMetric: every result type and failure an instant query can
// give, and its verdict before insufficient_data applies.
func TestJudgeMetric(t *testing.T) {
	vector := func(samples ...string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
	}
	for _, tc := range []struct {
		name, body string
		healthy    bool
		reason     Reason
		detail     string
	}{
		{"one sample", vector(`{"metric":{"__name__":"up","job":"web"},"value":[1700000000.5,"1"]}`), true, ReasonOK, ""},
		{"every sample non-zero", vector(`{"metric":{"i":"a"},"value":[1,"0.5"]}`, `{"metric":{"i":"b"},"value":[1,"-3"]}`, `{"metric":{"i":"c"},"value":[1,"+Inf"]}`), true, ReasonOK, ""},
		{"one sample zero", vector(`{"metric":{"i":"a"},"value":[1,"1"]}`, `{"metric":{"__name__":"up","job":"web","i":"b"},"value":[1,"0"]}`), false, ReasonMetricZero, `up{i="b",job="web"} is 0`},
		{"negative zero", vector(`{"metric":{},"value":[1,"-0"]}`), false, ReasonMetricZero, "{} is 0"},
		{"empty vector", vector(), false, ReasonMetricEmpty, "empty result"},
		{"NaN", vector(`{"metric":{"i":"a"},"value":[1,"1"]}`, `{"metric":{"i":"b"},"value":[1,"NaN"]}`), false, ReasonMetricEmpty, `{i="b"} is NaN`},
		{"zero beats NaN", vector(`{"metric":{"i":"a"},"value":[1,"NaN"]}`, `{"metric":{"i":"b"},"value":[1,"0"]}`), false, ReasonMetricZero, `{i="b"} is 0`},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`, true, ReasonOK, ""},
		{"scalar zero", `{"status":"success","data":{"resultType":"scalar","result":[1,"0"]}}`, false, ReasonMetricZero, "the scalar is 0"},
		{"scalar NaN", `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`, false, ReasonMetricEmpty, "the scalar is NaN"},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"i":"a"},"values":[[1,"1"],[2,"1"]]}]}}`, true, ReasonOK, ""},
		{"matrix zero in the window", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"i":"a"},"values":[[1,"1"],[2,"0"],[3,"1"]]}]}}`, false, ReasonMetricZero, `{i="a"} is 0`},
		{"empty matrix", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, false, ReasonMetricEmpty, "empty result"},
		{"string", `{"status":"success","data":{"resultType":"string","result":[1,"up"]}}`, false, ReasonMetricError, `result type "string", want vector, scalar or matrix`},
		{"error status", `{"status":"error","errorType":"bad_data","error":"parse error: unexpected end of input"}`, false, ReasonMetricError, "query failed: bad_data: parse error: unexpected end of input"},
		{"not JSON", `<html>gateway</html>`, false, ReasonMetricError, "response is not the API's JSON: invalid character '<' looking for beginning of value"},
		{"value not a number", vector(`{"metric":{"i":"a"},"value":[1,"high"]}`), false, ReasonMetricError, `{i="a"}: value "high" is not a number`},
		{"histogram sample", vector(`{"metric":{"i":"a"},"histogram":[1,{"count":"2"}]}`), false, ReasonMetricError, `{i="a"} has no value`},
		{"vector not a list", `{"status":"success","data":{"resultType":"vector","result":{}}}`, false, ReasonMetricError, "reading the vector: json: cannot unmarshal object into Go value of type []prober.series"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, detail := judgeMetric([]byte(tc.body))
			if v.healthy != tc.healthy || v.reason != tc.reason || detail != tc.detail {
				t.Errorf("got healthy=%v reason=%s detail=%q, want healthy=%v reason=%s detail=%q", v.healthy, v.reason, detail, tc.healthy, tc.reason, tc.detail)
			}
		})
	}
}

func TestMetricURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"http://198.18.1.2:9090", "http://198.18.1.2:9090/api/v1/query", ""},
		{"https://prom.example.test/prometheus/", "https://prom.example.test/prometheus/api/v1/query", ""},
		{"http://u:secret@198.18.1.2:9090", "http://u:secret@198.18.1.2:9090/api/v1/query", ""},
		{"198.18.1.2:9090", "", `parsing url: first path segment in URL cannot contain colon`},
		{"prom.example.test:9090", "", `url "prom.example.test:9090" must start with http:// or https://`},
		{"ftp://198.18.1.2", "", `url "ftp://198.18.1.2" must start with http:// or https://`},
		{"http:///x", "", `url "http:///x" names no host`},
		{"http://198.18.1.2:9090/?x=1", "", `url "http://198.18.1.2:9090/?x=1" must not hold a query or fragment`},
		{"http://u:secret@198.18.1.2:9090/api/v1/query", "", `url "http://u:xxxxx@198.18.1.2:9090/api/v1/query" must be the server's base URL: /api/v1/query is appended`},
	} {
		u, err := MetricURL(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("MetricURL(%q): error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || u.String() != tc.want):
			t.Errorf("MetricURL(%q) = %v, %v; want %s", tc.in, u, err, tc.want)
		}
	}
}

// promAPI is a fake Prometheus API: it answers each query with the body
// and status set last, and keeps the requests it saw.
type promAPI struct {
	mu     sync.Mutex
	status int
	body   string
	block  chan struct{} // while set, requests wait on it
	reqs   []*http.Request
	forms  []string
}

func (p *promAPI) set(status int, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.body = status, body
}

func (p *promAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	p.mu.Lock()
	p.reqs = append(p.reqs, r)
	p.forms = append(p.forms, r.PostForm.Encode())
	status, body, block := p.status, p.body, p.block
	p.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

const (
	promOne   = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"web"},"value":[1,"1"]}]}}`
	promZero  = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"web"},"value":[1,"0"]}]}}`
	promEmpty = `{"status":"success","data":{"resultType":"vector","result":[]}}`
)

func metricSpec(url string, mode Insufficient) Spec {
	return Spec{Type: Metric, URL: url, Query: `up{job="web"} == 1`, Insufficient: mode, Interval: time.Second, Timeout: 500 * time.Millisecond}
}

// TestMetricRequest: the check POSTs the query and the timeout as a form
// to the URL's /api/v1/query, with the URL's user as basic auth.
func TestMetricRequest(t *testing.T) {
	api := &promAPI{status: 200, body: promOne}
	srv := httptest.NewServer(api)
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1) + "/prom/"
	r := runCheck(t, nil, metricSpec(url, InsufficientHealthy))
	expect(t, r, true, ReasonOK, "")
	if len(api.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(api.reqs))
	}
	req := api.reqs[0]
	user, pass, _ := req.BasicAuth()
	if req.Method != "POST" || req.URL.Path != "/prom/api/v1/query" || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		api.forms[0] != "query=up%7Bjob%3D%22web%22%7D+%3D%3D+1&timeout=0.5" || user != "ops" || pass != "s3cret" {
		t.Errorf("request %s %s, content type %q, form %q, user %q:%q; want POST /prom/api/v1/query, a form with the query and timeout 0.5, user ops:s3cret",
			req.Method, req.URL.Path, req.Header.Get("Content-Type"), api.forms[0], user, pass)
	}
}

// TestMetricInsufficientData: a zero fails and a non-zero passes whatever
// the mode; no data and failed requests take the mode's result, last_known
// the last verdict, healthy before any.
func TestMetricInsufficientData(t *testing.T) {
	api := &promAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	const badQuery = `{"status":"error","errorType":"bad_data","error":"parse error"}`
	type step struct {
		status int
		body   string
		reason Reason
		detail string
		want   map[Insufficient]bool
	}
	all := func(h bool) map[Insufficient]bool {
		return map[Insufficient]bool{InsufficientHealthy: h, InsufficientUnhealthy: h, InsufficientLastKnown: h}
	}
	modes := func(last bool) map[Insufficient]bool {
		return map[Insufficient]bool{InsufficientHealthy: true, InsufficientUnhealthy: false, InsufficientLastKnown: last}
	}
	steps := []step{
		{200, promEmpty, ReasonMetricEmpty, "empty result", modes(true)}, // before any verdict
		{200, promZero, ReasonMetricZero, `{job="web"} is 0`, all(false)},
		{200, promEmpty, ReasonMetricEmpty, "empty result", modes(false)},
		{400, badQuery, ReasonMetricError, "status 400: query failed: bad_data: parse error", modes(false)},
		{200, promOne, ReasonOK, "", all(true)},
		{503, "Service Unavailable", ReasonMetricError, "status 503 from " + srv.URL + "/api/v1/query", modes(true)},
		{200, "{", ReasonMetricError, "response is not the API's JSON: unexpected end of JSON input", modes(true)},
	}
	checkers := map[Insufficient]Checker{}
	for _, mode := range Insufficients {
		c, err := New(metricSpec(srv.URL, mode), netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		checkers[mode] = c
	}
	for i, st := range steps {
		api.set(st.status, st.body)
		for _, mode := range Insufficients {
			r := checkers[mode].Check(context.Background())
			if r.Healthy != st.want[mode] || r.Reason != st.reason || r.Detail != st.detail {
				t.Errorf("step %d, %s: got healthy=%v reason=%s detail=%q, want healthy=%v reason=%s detail=%q",
					i, mode, r.Healthy, r.Reason, r.Detail, st.want[mode], st.reason, st.detail)
			}
		}
	}
}

// TestMetricUnreachable: a timeout and a refused connection are failed
// requests, judged by insufficient_data.
func TestMetricUnreachable(t *testing.T) {
	api := &promAPI{status: 200, body: promOne, block: make(chan struct{})}
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer close(api.block)
	s := metricSpec(srv.URL, InsufficientUnhealthy)
	s.Timeout = 100 * time.Millisecond
	expect(t, runCheck(t, nil, s), false, ReasonMetricError, "timeout")

	gone := httptest.NewServer(api)
	gone.Close()
	expect(t, runCheck(t, nil, metricSpec(gone.URL, InsufficientHealthy)), true, ReasonMetricError, "connection refused")
}

// TestMetricTLS: an https url has its certificate verified against the
// system's roots, which do not vouch for a test server's.
func TestMetricTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(&promAPI{status: 200, body: promOne})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake, expected
	srv.StartTLS()
	defer srv.Close()
	r := runCheck(t, nil, metricSpec(srv.URL, InsufficientUnhealthy))
	expect(t, r, false, ReasonMetricError, "")
	if !strings.Contains(r.Detail, "certificate signed by unknown authority") {
		t.Errorf("detail %q, want the certificate refused", r.Detail)
	}
}

// TestMetricSpecErrors: a checker is not built from a spec it cannot run.
func TestMetricSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Spec)
		err  string
	}{
		{"no url", func(s *Spec) { s.URL = "" }, `building metric checker: url "" must start with http:// or https://`},
		{"no query", func(s *Spec) { s.Query = "" }, "building metric checker: query is empty"},
		{"unknown mode", func(s *Spec) { s.Insufficient = "maybe" }, `building metric checker: unknown insufficient_data "maybe"`},
	} {
		s := metricSpec("http://198.18.1.2:9090", InsufficientHealthy)
		tc.mod(&s)
		if _, err := New(s, netip.Addr{}); err == nil || err.Error() != tc.err {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}
