package daemon_test

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/internal/compliance"
	"github.com/steadydns/steadydns/testenv"
)

// TestCompliance puts each of genreport's cases to a running server from
// the client host, over IPv4 and IPv6, with XDP attached and without: the
// zone's apex as genreport asks, and the same cases asking for A at a
// name the XDP program answers, so its headers and OPTs are held to the
// same rules as the fallback's.
func TestCompliance(t *testing.T) {
	for _, xdp := range []bool{true, false} {
		t.Run(fmt.Sprintf("xdp=%v", xdp), func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{})
			e := serve(t, env, func(link, pins string) string {
				if !xdp {
					link = ""
				}
				return fmt.Sprintf(configFile, link, "native", pins)
			})
			in0, out0 := e.d.Metrics().UDPBytes(dns.TypeSOA)
			for _, server := range []string{"198.18.0.2:53", "[fd53::2]:53"} {
				for _, target := range []struct {
					name  string
					qtype uint16 // 0: each case's own
				}{{"example.test.", 0}, {"www.example.test.", dns.TypeA}} {
					x0, _ := e.paths(t)
					for _, c := range compliance.Cases {
						var r compliance.Result
						if err := env.Client.Do(func() error { r = c.Run(server, target.name, target.qtype); return nil }); err != nil {
							t.Fatal(err)
						}
						if !r.OK() {
							t.Errorf("%s %s qtype %d: %s", server, target.name, target.qtype, r)
						}
					}
					x1, _ := e.paths(t)
					switch {
					case target.qtype == 0 && x1 != x0:
						t.Errorf("%s: xdp answered %d of the apex's queries, want none", server, x1-x0)
					case target.qtype == dns.TypeA && xdp && x1 == x0:
						t.Errorf("%s: xdp answered none of the A queries", server)
					case !xdp && x1 != x0:
						t.Errorf("%s: xdp answered %d queries while detached", server, x1-x0)
					}
				}
			}
			// The apex's SOA queries went to the fallback over UDP, and
			// their bytes were counted both ways.
			if in, out := e.d.Metrics().UDPBytes(dns.TypeSOA); in <= in0 || out <= out0 {
				t.Errorf("steadydns_udp_bytes_*_total{qtype=\"SOA\"} went from %d/%d to %d/%d", in0, out0, in, out)
			}
		})
	}
}
