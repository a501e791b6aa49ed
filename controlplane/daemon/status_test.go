package daemon_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// statusConfig has a record that answers NODATA when every candidate is
// down; its checks run rarely, so only the admin override moves them.
const statusConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, interval: 1m }
  web2: { type: tcp, target: 198.18.1.2, port: 80, interval: 1m }
records:
  - name: nd.example.test.
    type: A
    when_all_down: nodata
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2, check: web2}]
aggregation:
  push_interval: 100ms
`

// TestStatusAgreesWithTheWire: the candidates /api/v1/records (and so
// `steadydns status`) marks in are the ones the wire answers, also when
// when_all_down: nodata answers none.
func TestStatusAgreesWithTheWire(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	e := serve(t, env, func(link, pins string) string { return fmt.Sprintf(statusConfig, link, pins) })
	status := func() []string {
		var recs struct{ Records []api.RecordView }
		getAPI(t, env, "/api/v1/records", &recs)
		var in []string
		for _, r := range recs.Records {
			if r.Name != "nd.example.test." {
				continue
			}
			for _, a := range r.Answers {
				if a.In {
					in = append(in, a.Value)
				}
			}
		}
		slices.Sort(in)
		return in
	}
	for _, c := range []struct {
		name  string
		down  []string
		wire  []string
		rcode int
	}{
		{"all up", nil, []string{"198.18.1.1", "198.18.1.2"}, dns.RcodeSuccess},
		{"one down", []string{"web1"}, []string{"198.18.1.2"}, dns.RcodeSuccess},
		{"all down: nodata", []string{"web1", "web2"}, nil, dns.RcodeSuccess},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, id := range []string{"web1", "web2"} {
				state := "auto"
				if slices.Contains(c.down, id) {
					state = "down"
				}
				admin(t, e, id, state)
			}
			start := time.Now()
			for {
				r := e.ask(t, "udp", "198.18.0.2:53", q("nd.example.test.", dns.TypeA))
				got := addrs(r)
				if slices.Equal(got, c.wire) && r.Rcode == c.rcode {
					break
				}
				if time.Since(start) > 5*time.Second {
					t.Fatalf("the wire answers %v rcode %s, want %v", got, dns.RcodeToString[r.Rcode], c.wire)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if in := status(); !slices.Equal(in, c.wire) {
				t.Errorf("status marks %v in; the wire answers %v", in, c.wire)
			}
		})
	}
}

// admin sets a check's admin override through e's API.
func admin(t testing.TB, e *edge, check, state string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/"+check+"/admin", strings.NewReader(state))
	resp, err := e.api(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("admin %s %s: %s", check, state, resp.Status)
	}
}
