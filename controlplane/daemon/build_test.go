package daemon_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/prober"
)

// TestBuildMaxRecords checks that Build rejects a config whose record sets
// do not fit in the record table, counting names of every length and type
// and the zone file's A and AAAA sets with the configured ones.
func TestBuildMaxRecords(t *testing.T) {
	long := strings.Repeat(strings.Repeat("x", 60)+".", 3) + "example.test." // 197 wire bytes
	tests := []struct {
		name  string
		max   int
		names []string // one A set each
		aaaa  bool     // an AAAA set for every name too
		zone  string   // lines added to the zone file
		want  string   // the error after "steadydns.yaml:", or "" for none
	}{
		{"over", 2, []string{"a.example.test.", "b.example.test.", "c.example.test."}, false, "",
			"3: server.max_records: 3 record sets, more than the 2 the record table holds"},
		{"full", 3, []string{"a.example.test.", "b.example.test.", "c.example.test."}, false, "", ""},
		{"types count apart", 3, []string{"a.example.test.", "b.example.test."}, true, "",
			"3: server.max_records: 4 record sets, more than the 3 the record table holds"},
		{"zone sets count", 2, []string{"a.example.test.", "b.example.test."}, false, "static 3600 A 198.18.1.20\n",
			"3: server.max_records: 3 record sets, more than the 2 the record table holds"},
		{"long names count", 2, []string{"a.example.test.", long}, false, "static 3600 A 198.18.1.20\n",
			"3: server.max_records: 3 record sets, more than the 2 the record table holds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var records strings.Builder
			for i, name := range tt.names {
				fmt.Fprintf(&records, "  - { name: %s, type: A, answers: [{value: 198.18.1.%d}] }\n", name, i+1)
				if tt.aaaa {
					fmt.Fprintf(&records, "  - { name: %s, type: AAAA, answers: [{value: \"fd53:1::%d\"}] }\n", name, i+1)
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "steadydns.yaml")
			write(t, filepath.Join(dir, "example.test.zone"), "$ORIGIN example.test.\n@ 3600 SOA ns1.other.test. hostmaster 1 7200 3600 1209600 300\n@ 3600 NS ns1.other.test.\n"+tt.zone)
			write(t, path, fmt.Sprintf("server:\n  listen: [\"198.18.0.2:53\"]\n  max_records: %d\nzones:\n  - origin: example.test.\n    file: example.test.zone\nrecords:\n%s", tt.max, records.String()))
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = daemon.Build(cfg, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Build: %v", err)
			case tt.want != "" && (err == nil || err.Error() != path+":"+tt.want):
				t.Fatalf("Build: got %v\nwant %s:%s", err, path, tt.want)
			}
		})
	}
}

// TestProbes checks what the prober is given for each check of a config:
// every probed type with the settings the file gives it and the defaults
// it leaves out, the answer's address for a check without a target, and
// nothing for calculated and external checks.
func TestProbes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "steadydns.yaml")
	write(t, filepath.Join(dir, "example.test.zone"), "$ORIGIN example.test.\n@ 3600 SOA ns1.other.test. hostmaster 1 7200 3600 1209600 300\n@ 3600 NS ns1.other.test.\n")
	write(t, path, `server:
  listen: ["198.18.0.2:53"]
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web:
    type: http
    port: 8080
    path: /healthz
    method: HEAD
    host: www.example.test
    expect_status: [200, "300-399"]
    expect_body: ok
    keepalive: true
    interval: 1s
    timeout: 500ms
    unhealthy_threshold: 2
    healthy_threshold: 4
    invert: true
    admin: down
  tls:
    type: https
    target: web.backend.test
    sni: www.example.test
    expect_body_regexp: "^ok"
  db:
    type: tcp
    target: 198.18.1.5
    port: 5432
  smtp: { type: tcp, target: 198.18.1.6, port: 25, send: 'EHLO x\r\n', expect: "250" }
  cache: { type: tcp, target: 198.18.1.7, port: 6379, send: 'PING\r\n', expect_regexp: '^\+PONG' }
  syslog:
    type: udp
    target: fd53::9
    port: 514
    payload: ping
    expect_reply: pong
  gw:
    type: icmp
  ns:
    type: dns
    target: 198.18.0.2
    qname: www.example.test
    qtype: AAAA
    expect_rcode: NXDOMAIN
    expect_answer: fd53::10
  orders: { type: metric, url: "http://198.18.1.8:9090", query: 'rate(orders_total[1m]) > 0', insufficient_data: healthy }
  # insufficient_data is the state after invert: the prober reports the raw opposite.
  errors: { type: metric, url: "http://198.18.1.8:9090", query: 'errors > 0', insufficient_data: healthy, invert: true }
  stuck: { type: metric, url: "http://198.18.1.8:9090", query: up, invert: true }
  both:
    type: calculated
    children: [web, db]
  deploy:
    type: external
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web }
      - { value: 198.18.1.2, check: gw }
      - { value: 198.18.1.3, check: both }
      - { value: 198.18.1.4, check: deploy }
  - name: www.example.test.
    type: AAAA
    answers: [{ value: "fd53::1", check: gw }]
`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := daemon.Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const iv, to = 10 * time.Second, 2 * time.Second // the defaults
	want := map[string]prober.Probe{
		"web": {Target: netip.MustParseAddr("198.18.1.1"), Spec: prober.Spec{
			Type: prober.HTTP, Port: 8080, Interval: time.Second, Timeout: 500 * time.Millisecond,
			Path: "/healthz", Method: "HEAD", Host: "www.example.test",
			ExpectStatus: []prober.StatusRange{{Lo: 200, Hi: 200}, {Lo: 300, Hi: 399}}, ExpectBody: "ok", KeepAlive: true,
		}},
		"tls": {Spec: prober.Spec{
			Type: prober.HTTPS, Target: "web.backend.test", Port: 443, Interval: iv, Timeout: to,
			Path: "/", Method: "GET", SNI: "www.example.test", TLSVerify: true,
			ExpectStatus: []prober.StatusRange{{Lo: 200, Hi: 399}},
		}},
		"db":     {Spec: prober.Spec{Type: prober.TCP, Target: "198.18.1.5", Port: 5432, Interval: iv, Timeout: to}},
		"smtp":   {Spec: prober.Spec{Type: prober.TCP, Target: "198.18.1.6", Port: 25, Interval: iv, Timeout: to, Send: "EHLO x\r\n", Expect: "250"}},
		"cache":  {Spec: prober.Spec{Type: prober.TCP, Target: "198.18.1.7", Port: 6379, Interval: iv, Timeout: to, Send: "PING\r\n"}},
		"syslog": {Spec: prober.Spec{Type: prober.UDP, Target: "fd53::9", Port: 514, Interval: iv, Timeout: to, Payload: "ping", ExpectReply: "pong"}},
		"gw":     {Target: netip.MustParseAddr("198.18.1.2"), Spec: prober.Spec{Type: prober.ICMP, Interval: iv, Timeout: to}},
		"ns": {Spec: prober.Spec{
			Type: prober.DNS, Target: "198.18.0.2", Port: 53, Interval: iv, Timeout: to,
			QName: "www.example.test.", QType: dns.TypeAAAA, ExpectRcode: dns.RcodeNameError, ExpectAnswer: "fd53::10",
		}},
		"orders": {Spec: prober.Spec{Type: prober.Metric, Interval: iv, Timeout: to, URL: "http://198.18.1.8:9090", Query: "rate(orders_total[1m]) > 0", Insufficient: prober.InsufficientHealthy}},
		"errors": {Spec: prober.Spec{Type: prober.Metric, Interval: iv, Timeout: to, URL: "http://198.18.1.8:9090", Query: "errors > 0", Insufficient: prober.InsufficientUnhealthy}},
		"stuck":  {Spec: prober.Spec{Type: prober.Metric, Interval: iv, Timeout: to, URL: "http://198.18.1.8:9090", Query: "up", Insufficient: prober.InsufficientLastKnown}},
	}
	got := p.Probes()
	if re := got["tls"].Spec.ExpectBodyRegexp; re == nil || re.String() != "^ok" {
		t.Errorf("tls: expect_body_regexp became %v, want ^ok", re)
	}
	if re := got["cache"].Spec.ExpectRegexp; re == nil || re.String() != `^\+PONG` {
		t.Errorf("cache: expect_regexp became %v, want ^\\+PONG", re)
	}
	for id, w := range want {
		w.Index, _ = p.Index.Entry(id)
		g := got[id]
		if w.Index == 0 || g.Index != w.Index {
			t.Errorf("%s: index %d, want %d (non-zero)", id, g.Index, w.Index)
		}
		g.Spec.ExpectBodyRegexp, g.Spec.ExpectRegexp = nil, nil // compared above; compiled programs are not comparable
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", id, g, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s is probed, want it left to the aggregator", id)
		}
	}

	// Every setting of a Spec is filled by one check or another, so a
	// setting added to prober.Spec cannot be left out of the control
	// plane's copy unnoticed.
	specs := reflect.TypeFor[prober.Spec]()
	for i := range specs.NumField() {
		set := false
		for _, pr := range p.Probes() {
			set = set || !reflect.ValueOf(pr.Spec).Field(i).IsZero()
		}
		if !set {
			t.Errorf("no check sets Spec.%s: give one in this test's config", specs.Field(i).Name)
		}
	}
}
