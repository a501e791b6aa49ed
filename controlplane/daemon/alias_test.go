package daemon_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// aliasConfig: lb is two real HTTP backends; the apex fails over from an
// alias of lb, healthy while lb has a healthy answer, to a value; api is
// lb's alias alone, which XDP answers as a copy of lb; www is a checked
// CNAME set that falls back to the zone's static name.
const aliasConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  rrl: {rate: 0}
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: http, target: 198.18.1.1, port: 80, path: /healthz, expect_body: ok, interval: 200ms, timeout: 150ms, unhealthy_threshold: 2, healthy_threshold: 1 }
  web2: { type: http, target: 198.18.1.2, port: 80, path: /healthz, expect_body: ok, interval: 200ms, timeout: 150ms, unhealthy_threshold: 2, healthy_threshold: 1 }
records:
  - name: lb.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2, check: web2}]
  - name: example.test.
    type: A
    policy: failover
    answers:
      - { alias: lb.example.test., evaluate_target_health: true }
      - { value: 198.18.1.30, priority: 1 }
  - name: api.example.test.
    type: A
    answers: [{alias: lb.example.test., evaluate_target_health: true}]
  - name: www.example.test.
    type: CNAME
    ttl: 20
    policy: failover
    answers:
      - { value: lb.example.test., check: web1 }
      - { value: static.example.test., priority: 1 }
aggregation:
  push_interval: 100ms
`

// TestAliasAndCNAMEOverTheWire: real backends behind an apex alias with
// evaluate_target_health in failover, its copy that XDP answers, and a
// checked CNAME set, each asked over DNS as the backends stop and start.
func TestAliasAndCNAMEOverTheWire(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	env := testenv.Start(t, testenv.Options{Backends: 2})
	backends := []*httpBackend{{host: env.Backends[0]}, {host: env.Backends[1]}}
	for _, b := range backends {
		b.start(t)
		t.Cleanup(b.stop)
	}
	e := serve(t, env, func(link, pins string) string { return fmt.Sprintf(aliasConfig, link, pins) })

	// expect polls, for up to ten seconds, a change that never comes and
	// not a loaded machine, until name's answer to qtype reads want
	// (every record, one a line, as dig prints them without the TTL) and
	// came from XDP or from the fallback as viaXDP says.
	expect := func(what, name string, qtype uint16, viaXDP bool, want ...string) {
		t.Helper()
		start := time.Now()
		for {
			x0, _ := e.paths(t)
			r := e.ask(t, "udp", "198.18.0.2:53", q(name, qtype))
			x1, _ := e.paths(t)
			var got []string
			for _, rr := range r.Answer {
				f := strings.Fields(rr.String())
				got = append(got, strings.Join(append(f[:1:1], f[3:]...), " "))
			}
			slices.Sort(got)
			if r.Rcode == dns.RcodeSuccess && r.Authoritative && slices.Equal(got, want) && (x1 == x0+1) == viaXDP {
				return
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: %s %s answered %q (xdp %v), want %q (xdp %v)", what, name, dns.TypeToString[qtype], got, x1 == x0+1, want, viaXDP)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	const (
		a1, a2       = "A 198.18.1.1", "A 198.18.1.2"
		toLB, toStat = "www.example.test. CNAME lb.example.test.", "www.example.test. CNAME static.example.test."
	)
	expect("apex, lb healthy", "example.test.", dns.TypeA, false, "example.test. "+a1, "example.test. "+a2)
	expect("copy, lb healthy", "api.example.test.", dns.TypeA, true, "api.example.test. "+a1, "api.example.test. "+a2)
	expect("cname chased", "www.example.test.", dns.TypeA, false, "lb.example.test. "+a1, "lb.example.test. "+a2, toLB)
	expect("cname asked for", "www.example.test.", dns.TypeCNAME, false, toLB)
	expect("cname, another type", "www.example.test.", dns.TypeMX, false, toLB)

	backends[0].stop()
	expect("apex, web1 down", "example.test.", dns.TypeA, false, "example.test. "+a2)
	expect("copy, web1 down", "api.example.test.", dns.TypeA, true, "api.example.test. "+a2)
	expect("cname moves on", "www.example.test.", dns.TypeA, false, "static.example.test. A 198.18.1.20", "static.example.test. A 198.18.1.21", toStat)

	backends[1].stop()
	expect("apex, lb down: the backup value", "example.test.", dns.TypeA, false, "example.test. A 198.18.1.30")
	// lb fails open, and its copy with it.
	expect("copy, lb down", "api.example.test.", dns.TypeA, true, "api.example.test. "+a1, "api.example.test. "+a2)
	var recs struct{ Records []api.RecordView }
	getAPI(t, env, "/api/v1/records", &recs)
	i := slices.IndexFunc(recs.Records, func(r api.RecordView) bool { return r.Name == "example.test." })
	if i < 0 || len(recs.Records[i].Answers) != 2 {
		t.Fatalf("apex in /api/v1/records: %+v", recs.Records)
	}
	if a := recs.Records[i].Answers[0]; a.Value != "alias lb.example.test." || a.Check != "alias:lb.example.test.:A" || a.Healthy || a.In {
		t.Errorf("apex alias in /api/v1/records: %+v, want alias lb.example.test. down and out", a)
	}

	backends[1].start(t)
	expect("apex, web2 back", "example.test.", dns.TypeA, false, "example.test. "+a2)
	expect("copy, web2 back", "api.example.test.", dns.TypeA, true, "api.example.test. "+a2)
	backends[0].start(t)
	expect("cname back to lb", "www.example.test.", dns.TypeA, false, "lb.example.test. "+a1, "lb.example.test. "+a2, toLB)
}
