package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/history"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/prober"
)

const zoneFile = `$ORIGIN example.test.
$TTL 3600
@       SOA  ns1 hostmaster 1 7200 3600 1209600 300
@       NS   ns1
ns1     A    198.18.0.2
`

const configFile = `server:
  listen: ["198.18.0.2:53"]
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, unhealthy_threshold: 1, healthy_threshold: 1 }
  web2: { type: tcp, target: 198.18.1.2, port: 80, unhealthy_threshold: 1, healthy_threshold: 1 }
  ext: { type: external, ttl: 1m, initial: unhealthy }
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web2 }
  - name: ext.example.test.
    type: A
    answers:
      - { value: 198.18.1.3, check: ext }
  - name: static.example.test.
    type: A
    answers:
      - { value: 198.18.1.4 }
aggregation:
  table_size: 16
`

// memStore holds the table as the data plane's map would.
type memStore struct{ table []byte }

func (m *memStore) PushHealthAt(table []byte, version, configHash, staleAfterNs, arrivedNs uint64) (bpf.SteadydnsTableMeta, error) {
	m.table = append(m.table[:0], table...)
	return bpf.SteadydnsTableMeta{Version: version, ConfigHash: configHash, ArrivedNs: arrivedNs, StaleAfterNs: staleAfterNs}, nil
}

func (m *memStore) HealthUpAt(i uint32) bool { return healthtable.Up(m.table, i) }

// server is a real aggregator, event log and edge table behind the API.
type server struct {
	agg      *health.Aggregator
	table    *edge.Table
	events   health.EventLog
	compiled *records.Compiled
	cfg      *config.Config
	index    *health.Index
	metrics  *api.Metrics
	http     *httptest.Server
	history  *history.Store // this host's prober's results
}

func (s *server) XDPOutcomes() (map[string]uint64, error) {
	return map[string]uint64{"answered": 5, "qtype": 2}, nil
}
func (s *server) Aggregator() *health.Aggregator { return s.agg }
func (s *server) Table() *edge.Table             { return s.table }
func (s *server) Events() *health.EventLog       { return &s.events }
func (s *server) Records() *records.Compiled     { return s.compiled }
func (s *server) History() *history.Store        { return s.history }

// entry is check id's entry in the table.
func (s *server) entry(id string) uint32 {
	i, _ := s.index.Entry(id)
	return i
}
func (s *server) Statuses() []health.Status { return s.agg.Statuses() }
func (s *server) Fleet() api.FleetView {
	return api.FleetView{ID: "h1", Roles: []string{"prober", "aggregator", "edge"}}
}
func (s *server) SetAdmin(id, v string) error { return s.agg.SetAdmin(id, v) }
func (s *server) SetExternal(id string, up bool) error {
	return s.agg.SetExternal(id, up, time.Now())
}

// Reload validates the config file again, as the daemon's reload starts by
// doing.
func (s *server) Reload() error {
	_, err := config.Load(s.cfg.File)
	return err
}

// Ready is the edge's table rule: not before the first table.
func (s *server) Ready() error {
	if s.table.Meta().Cold {
		return errors.New("no health table yet")
	}
	return nil
}

func newServer(t *testing.T) *server { return newServerWith(t, configFile) }

// newServerWith is newServer for the config cfgText.
func newServerWith(t *testing.T, cfgText string) *server {
	t.Helper()
	dir := t.TempDir()
	for name, s := range map[string]string{"example.test.zone": zoneFile, "steadydns.yaml": cfgText} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "steadydns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	z, err := zone.Load("example.test.", filepath.Join(dir, "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cfg: cfg, history: history.New()}
	if s.index, err = health.AssignConfig(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if s.compiled, err = records.Compile(cfg, []*zone.Zone{z}, s.index.AnswerEntry); err != nil {
		t.Fatal(err)
	}
	s.table = edge.New(&memStore{}, bpf.SteadydnsTableMeta{})
	if s.agg, err = health.New(cfg, s.index, s.table, health.Seed{}, &s.events); err != nil {
		t.Fatal(err)
	}
	s.metrics = api.NewMetrics(s)
	s.http = httptest.NewServer(api.Handler(s, s.metrics))
	t.Cleanup(s.http.Close)
	return s
}

// fail reports web1 failing from one checker, as a frame and a result.
func (s *server) fail(t *testing.T, now time.Time) {
	t.Helper()
	f := prober.Frame{Version: 1, ConfigHash: s.cfg.Hash, Prober: "p1", Entries: make([]prober.Entry, s.cfg.Aggregation.TableSize)}
	f.Entries[0] = prober.Entry{Index: s.entry("web1"), Seq: 1, Reason: prober.ReasonTimeout, Latency: 1500 * time.Microsecond}
	b, err := prober.Encode(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.agg.IngestFrame(b, now); err != nil {
		t.Fatal(err)
	}
	s.agg.Observe(prober.Result{ID: "web1", Index: s.entry("web1"), Seq: 1, Time: now, Reason: prober.ReasonTimeout,
		Detail: "no reply in 2s", Latency: 1500 * time.Microsecond})
}

func (s *server) push(t *testing.T, now time.Time) {
	t.Helper()
	if err := s.agg.Push(now); err != nil {
		t.Fatal(err)
	}
}

func (s *server) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s, %s", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// put sends body and returns the status and the error message, if any.
func (s *server) put(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	if resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("PUT %s: %s with a body that is not an error: %v", path, resp.Status, err)
		}
	}
	return resp.StatusCode, e.Error
}

type checks struct {
	Table  api.TableView
	Checks []api.CheckView
}

func (c *checks) find(t *testing.T, id string) api.CheckView {
	t.Helper()
	for _, v := range c.Checks {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("no check %s in %+v", id, c.Checks)
	return api.CheckView{}
}

type recordList struct {
	Table   api.TableView
	Records []api.RecordView
}

func (r *recordList) find(t *testing.T, name string) api.RecordView {
	t.Helper()
	for _, v := range r.Records {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no record %s in %+v", name, r.Records)
	return api.RecordView{}
}

// TestChecks: every check by id, with its state, the reason, the checkers
// heard, its recent results and the records it feeds; and the table.
func TestChecks(t *testing.T) {
	s := newServer(t)
	var c checks
	s.get(t, "/api/v1/checks", &c)
	if !c.Table.ColdOpen || c.Table.Version != 0 {
		t.Errorf("before any push: table %+v, want cold", c.Table)
	}
	var ids []string
	for _, v := range c.Checks {
		ids = append(ids, v.ID)
	}
	if !slices.Equal(ids, []string{"ext", "web1", "web2"}) {
		t.Errorf("checks %v, want ext, web1, web2", ids)
	}

	now := time.Now()
	s.fail(t, now)
	s.push(t, now)
	c = checks{}
	s.get(t, "/api/v1/checks", &c)
	if c.Table.ColdOpen || c.Table.Stale || c.Table.Version == 0 || c.Table.Frames != 1 || c.Table.FramesRejected != 0 {
		t.Errorf("after a push: table %+v, want a fresh table and one frame", c.Table)
	}
	web1 := c.find(t, "web1")
	if web1.Up || web1.Reason != "timeout" || web1.Type != "tcp" || web1.Index != s.entry("web1") || web1.Admin != "auto" ||
		web1.Checkers != 1 || web1.Healthy != 0 || !web1.Since.Equal(now) {
		t.Errorf("web1 %+v: want unhealthy (timeout) since the push, 1 checker", web1)
	}
	if len(web1.Results) != 1 || web1.Results[0].Reason != "timeout" || web1.Results[0].Detail != "no reply in 2s" || web1.Results[0].LatencyMs != 1.5 {
		t.Errorf("web1 results %+v, want the one timeout, 1.5 ms", web1.Results)
	}
	if !slices.Equal(web1.Records, []string{"www.example.test. A"}) {
		t.Errorf("web1 feeds %v, want www.example.test. A", web1.Records)
	}
	if web2 := c.find(t, "web2"); !web2.Up || web2.Reason != "no_results" || web2.Checkers != 0 {
		t.Errorf("web2 %+v: want healthy, no results yet", web2)
	}

	// The JSON names are what scripts and `steadydns status` read.
	var raw struct {
		Table  map[string]any
		Checks []map[string]any
	}
	s.get(t, "/api/v1/checks", &raw)
	keys := func(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
	if got := keys(raw.Table); !slices.Equal(got, []string{"age_seconds", "fail_open_cold_start", "frames_ingested", "frames_rejected", "last_push_seconds", "stale", "version"}) {
		t.Errorf("table keys %v", got)
	}
	for _, c := range raw.Checks {
		if c["id"] != "web1" {
			continue
		}
		if got := keys(c); !slices.Equal(got, []string{"admin", "checkers_healthy", "checkers_reporting", "healthy", "id", "index", "last_results", "reason", "records", "since", "type", "votes"}) {
			t.Errorf("check keys %v", got)
		}
		vote := c["votes"].([]any)[0].(map[string]any)
		if got := keys(vote); !slices.Equal(got, []string{"checker", "counted", "healthy", "last_heard"}) {
			t.Errorf("vote keys %v", got)
		}
		if vote["checker"] != "p1" || vote["healthy"] != false || vote["counted"] != true {
			// One failure meets web1's unhealthy_threshold of 1.
			t.Errorf("p1's vote on web1: %v", vote)
		}
		res := c["last_results"].([]any)[0].(map[string]any)
		if got := keys(res); !slices.Equal(got, []string{"counted", "detail", "healthy", "latency_ms", "reason", "time"}) {
			t.Errorf("result keys %v", got)
		}
	}
}

// TestReasonAgreesWithLastResult: results arrive as checks finish, while
// a check's state and reason change at the push, from the frames in by
// then. A dead host on the local link makes a check time out while ARP is
// pending and then fail with "unreachable" when it gives up, so the newest
// result often differs from the reason. `steadydns status` shows the
// newest result the reason counts.
func TestReasonAgreesWithLastResult(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	s.fail(t, now) // seq 1, timeout: framed and observed
	s.push(t, now)
	// seq 2 finished after the frame: observed, not framed yet.
	s.agg.Observe(prober.Result{ID: "web1", Index: s.entry("web1"), Seq: 2, Time: now.Add(time.Second), Reason: prober.ReasonUnreachable,
		Detail: "host unreachable", Latency: 50 * time.Millisecond})
	var c checks
	s.get(t, "/api/v1/checks", &c)
	web1 := c.find(t, "web1")
	if len(web1.Results) != 2 || web1.Results[0].Counted || !web1.Results[1].Counted {
		t.Fatalf("web1 results %+v: want the unreachable one not counted, the timeout counted", web1.Results)
	}
	if last := web1.LastCounted(); last == nil || last.Reason != web1.Reason {
		t.Errorf("web1's reason is %s and its last counted result %+v", web1.Reason, last)
	}

	// Once framed and pushed, the newest result is counted and the
	// reason is its.
	f := prober.Frame{Version: 2, ConfigHash: s.cfg.Hash, Prober: "p1", Entries: make([]prober.Entry, s.cfg.Aggregation.TableSize)}
	f.Entries[0] = prober.Entry{Index: s.entry("web1"), Seq: 2, Reason: prober.ReasonUnreachable}
	b, err := prober.Encode(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.agg.IngestFrame(b, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	s.push(t, now.Add(time.Second))
	c = checks{}
	s.get(t, "/api/v1/checks", &c)
	web1 = c.find(t, "web1")
	if last := web1.LastCounted(); web1.Reason != "unreachable" || last == nil || last.Reason != "unreachable" || last != &web1.Results[0] {
		t.Errorf("after the push: reason %s, last counted %+v", web1.Reason, last)
	}
}

// TestRecords: every candidate of every record, whether it is in the
// answer and why.
func TestRecords(t *testing.T) {
	s := newServer(t)
	var r recordList
	s.get(t, "/api/v1/records", &r)
	if !r.Table.ColdOpen {
		t.Errorf("table %+v, want cold", r.Table)
	}
	for _, a := range r.find(t, "www.example.test.").Answers {
		if !a.In || !strings.HasPrefix(a.Reason, "cold start") {
			t.Errorf("before any table: %+v, want in, for the cold start", a)
		}
	}

	now := time.Now()
	s.fail(t, now)
	s.push(t, now)
	r = recordList{}
	s.get(t, "/api/v1/records", &r)
	www := r.find(t, "www.example.test.")
	want := []api.AnswerView{
		{Value: "198.18.1.1", Check: "web1", Healthy: false, In: false, Reason: "unhealthy: timeout"},
		{Value: "198.18.1.2", Check: "web2", Healthy: true, In: true, Reason: "healthy: no_results"},
	}
	if www.Type != "A" || www.Policy != "multivalue" || !www.Dynamic || !slices.Equal(www.Answers, want) {
		t.Errorf("www %+v\nwant answers %+v", www, want)
	}
	// Its only candidate is down: when_all_down's default answers it.
	wantExt := []api.AnswerView{{Value: "198.18.1.3", Check: "ext", Healthy: false, In: true,
		Reason: "failing open: too few healthy candidates, answered although no_results"}}
	if ext := r.find(t, "ext.example.test."); !slices.Equal(ext.Answers, wantExt) {
		t.Errorf("ext answers %+v, want %+v", ext.Answers, wantExt)
	}
	var raw struct{ Records []map[string]any }
	s.get(t, "/api/v1/records", &raw)
	i := slices.IndexFunc(raw.Records, func(r map[string]any) bool { return r["name"] == "www.example.test." })
	if got := slices.Sorted(maps.Keys(raw.Records[i])); !slices.Equal(got, []string{"answers", "dynamic", "name", "policy", "type"}) {
		t.Errorf("record keys %v", got)
	}
	if got := slices.Sorted(maps.Keys(raw.Records[i]["answers"].([]any)[0].(map[string]any))); !slices.Equal(got, []string{"check", "healthy", "in", "reason", "value"}) {
		t.Errorf("answer keys %v", got)
	}
	if st := r.find(t, "static.example.test."); len(st.Answers) != 1 || !st.Answers[0].In || st.Answers[0].Reason != "no check: always healthy" {
		t.Errorf("static %+v, want in without a check", st)
	}
}

// TestEvents: a transition shows in the log with its reason and detail.
func TestEvents(t *testing.T) {
	s := newServer(t)
	var e struct{ Events []api.EventView }
	s.get(t, "/api/v1/events", &e)
	if len(e.Events) != 0 {
		t.Errorf("events %+v before any transition", e.Events)
	}
	now := time.Now()
	s.push(t, now)
	s.fail(t, now.Add(time.Second))
	s.push(t, now.Add(time.Second))
	s.get(t, "/api/v1/events", &e)
	want := []api.EventView{{Time: now.Add(time.Second), Check: "web1", Records: []string{}, From: "healthy", To: "unhealthy", Reason: "timeout", Detail: "no reply in 2s"}}
	var raw struct{ Events []map[string]any }
	s.get(t, "/api/v1/events", &raw)
	keys := []string{"cell", "check", "detail", "from", "host", "id", "reason", "records", "time", "to"}
	if len(raw.Events) != 1 || !slices.Equal(slices.Sorted(maps.Keys(raw.Events[0])), keys) {
		t.Errorf("events %v: want one, with %v", raw.Events, keys)
	}
	if len(e.Events) != 1 || !e.Events[0].Time.Equal(want[0].Time) {
		t.Fatalf("events %+v, want %+v", e.Events, want)
	}
	e.Events[0].Time = want[0].Time
	if !reflect.DeepEqual(e.Events[0], want[0]) {
		t.Errorf("event %+v, want %+v", e.Events[0], want[0])
	}
}

// TestAdmin: PUT admin takes auto, up or down and applies at the next
// push; anything else is a 400, an unknown check a 404.
func TestAdmin(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	s.fail(t, now)
	s.push(t, now)
	if code, msg := s.put(t, "/api/v1/checks/web1/admin", "up\n"); code != http.StatusNoContent {
		t.Fatalf("admin up: %d %s", code, msg)
	}
	s.push(t, now.Add(time.Second))
	var c checks
	s.get(t, "/api/v1/checks", &c)
	if web1 := c.find(t, "web1"); !web1.Up || web1.Admin != "up" || web1.Reason != "admin_up" {
		t.Errorf("web1 after admin up: %+v", web1)
	}
	if !s.table.Up(s.entry("web1")) {
		t.Error("admin up did not reach the table")
	}
	for _, tc := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/api/v1/checks/web1/admin", "sideways", http.StatusBadRequest, `"sideways" is not auto, up or down`},
		{"/api/v1/checks/web1/admin", "", http.StatusBadRequest, `"" is not auto, up or down`},
		{"/api/v1/checks/web9/admin", "down", http.StatusNotFound, "no such check"},
	} {
		if code, msg := s.put(t, tc.path, tc.body); code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("PUT %s %q: %d %q, want %d with %q", tc.path, tc.body, code, msg, tc.code, tc.msg)
		}
	}
	s.get(t, "/api/v1/checks", &c)
	if web1 := c.find(t, "web1"); web1.Admin != "up" {
		t.Errorf("a rejected override changed web1: %+v", web1)
	}
}

// TestExternal: PUT external takes up or down for an external check and
// holds for its ttl; anything else is refused.
func TestExternal(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	s.push(t, now)
	if s.table.Up(s.entry("ext")) {
		t.Fatal("external check up before any report")
	}
	if code, msg := s.put(t, "/api/v1/checks/ext/external", "up"); code != http.StatusNoContent {
		t.Fatalf("external up: %d %s", code, msg)
	}
	s.push(t, time.Now())
	var c checks
	s.get(t, "/api/v1/checks", &c)
	if ext := c.find(t, "ext"); !ext.Up || ext.Reason != "external" {
		t.Errorf("ext after up: %+v", ext)
	}
	if code, msg := s.put(t, "/api/v1/checks/ext/external", " down "); code != http.StatusNoContent {
		t.Fatalf("external down: %d %s", code, msg)
	}
	s.push(t, time.Now())
	if s.table.Up(s.entry("ext")) {
		t.Error("external down did not reach the table")
	}
	for _, tc := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/api/v1/checks/ext/external", "maybe", http.StatusBadRequest, `external state "maybe" is not up or down`},
		{"/api/v1/checks/web1/external", "up", http.StatusBadRequest, "it is a tcp check"},
		{"/api/v1/checks/web9/external", "up", http.StatusNotFound, "no such check"},
	} {
		if code, msg := s.put(t, tc.path, tc.body); code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("PUT %s %q: %d %q, want %d with %q", tc.path, tc.body, code, msg, tc.code, tc.msg)
		}
	}
}

// TestMetrics: the names and labels dashboards and alerts use.
func TestMetrics(t *testing.T) {
	s := newServer(t)
	now := time.Now()
	s.fail(t, now)
	s.push(t, now)
	s.agg.OnPush(s.metrics.ObservePush)
	s.push(t, now)
	s.metrics.ObserveFallback("answered", 30*time.Microsecond)
	s.metrics.ObserveFallback("answered", 40*time.Microsecond)
	s.metrics.ObserveFallback("dropped", 0)
	s.metrics.ObserveCheck("tcp", prober.Result{Reason: prober.ReasonTimeout, Latency: 300 * time.Millisecond})
	s.metrics.ObserveReload(nil)
	s.metrics.ObserveReload(errors.New("bad config"))
	s.metrics.ObserveUDP(dns.TypeANY, 40, 60)
	s.metrics.ObserveUDP(dns.TypeANY, 40, 0)
	s.metrics.ObserveUDP(65000, 30, 500) // an odd qtype goes to "other"
	s.metrics.ObserveUDP(0, 12, 12)      // no question
	for _, e := range []fallback.TCPEvent{fallback.TCPOpened, fallback.TCPOpened, fallback.TCPOpened, fallback.TCPEvictedBusy,
		fallback.TCPIdleTimeout, fallback.TCPClosed, fallback.TCPEvicted, fallback.TCPClosed, fallback.TCPLifetime, fallback.TCPLifetime,
		fallback.TCPOpened, fallback.TCPHandshakeFailed, fallback.TCPClosed} {
		s.metrics.ObserveTCP(e)
	}
	resp, err := http.Get(s.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`steadydns_queries_total{outcome="answered",path="xdp"} 5`,
		`steadydns_xdp_passed_total{reason="qtype"} 2`,
		`steadydns_queries_total{outcome="answered",path="fallback"} 2`,
		`steadydns_queries_total{outcome="dropped",path="fallback"} 1`,
		`steadydns_fallback_reply_seconds_count 2`,
		`steadydns_fallback_reply_seconds_bucket{le="5e-05"} 2`,
		`steadydns_check_duration_seconds_bucket{reason="timeout",type="tcp",le="0.5"} 1`,
		`steadydns_check_vote{check="web1",checker="p1"} 0`,
		`steadydns_check_vote_series_dropped 0`,
		`steadydns_health_push_duration_seconds_count 1`,
		`steadydns_reloads_total 2`,
		`steadydns_reload_errors_total 1`,
		`steadydns_tcp_connections 1`,
		`steadydns_tcp_connections_closed_total{reason="timeout"} 1`,
		`steadydns_tcp_connections_closed_total{reason="evicted"} 1`,
		`steadydns_tcp_connections_closed_total{reason="busy"} 1`,
		`steadydns_tcp_connections_closed_total{reason="lifetime"} 2`,
		`steadydns_tcp_connections_closed_total{reason="queries"} 0`,
		`steadydns_tcp_connections_closed_total{reason="tls"} 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
		`steadydns_check_healthy{check="web1"} 0`,
		`steadydns_check_healthy{check="web2"} 1`,
		`steadydns_health_table_cold 0`,
		`steadydns_health_table_age_seconds `,
		`steadydns_health_table_version `,
		`steadydns_metrics_errors_total 0`,
		`steadydns_frames_total 1`,
		`steadydns_frames_rejected_total 0`,
		`steadydns_health_push_seconds `,
		`steadydns_udp_bytes_in_total{qtype="ANY"} 80`,
		`steadydns_udp_bytes_out_total{qtype="ANY"} 60`,
		`steadydns_udp_bytes_in_total{qtype="other"} 42`,
		`steadydns_udp_bytes_out_total{qtype="other"} 512`,
		`steadydns_udp_bytes_in_total{qtype="A"} 0`,
	} {
		if !strings.Contains(string(b), "\n"+want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := s.metrics.FallbackCount("answered"); got != 2 {
		t.Errorf("FallbackCount %d, want 2", got)
	}
}

// TestHealthReadyReload: /healthz always 200; /readyz 503 with the reason
// until the first table, then 200; POST /api/v1/reload 204, or 422 with the
// refused config's error.
func TestHealthReadyReload(t *testing.T) {
	s := newServer(t)
	call := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.http.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := call("GET", "/readyz"); code != 503 || body != "not ready: no health table yet\n" {
		t.Errorf("/readyz before a table: %d %q", code, body)
	}
	s.push(t, time.Now())
	if code, body := call("GET", "/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz after a table: %d %q", code, body)
	}
	if code, body := call("POST", "/api/v1/reload"); code != 204 {
		t.Errorf("reload: %d %q", code, body)
	}
	if err := os.WriteFile(s.cfg.File, []byte("server: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body := call("POST", "/api/v1/reload")
	var e struct{ Error string }
	json.Unmarshal([]byte(body), &e)
	if code != 422 || !strings.HasPrefix(e.Error, s.cfg.File+":1:") {
		t.Errorf("reload of a broken file: %d %q, want 422 with its error", code, body)
	}
}

// slowReload is a server whose reload outlasts the API server's write
// timeout, as one of a zone of millions of names does.
type slowReload struct {
	*server
	wait time.Duration
}

func (s slowReload) Reload() error {
	time.Sleep(s.wait)
	return s.server.Reload()
}

// TestSlowReloadAnswers: a reload that takes longer than the server's
// write timeout still answers with its outcome, not a closed connection.
func TestSlowReloadAnswers(t *testing.T) {
	s := newServer(t)
	srv := api.NewServer(api.Handler(slowReload{s, 500 * time.Millisecond}, s.metrics))
	srv.WriteTimeout = 50 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	resp, err := http.Post("http://"+ln.Addr().String()+"/api/v1/reload", "", nil)
	if err != nil {
		t.Fatalf("reloading: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("reload answered %s, want 204", resp.Status)
	}
}
