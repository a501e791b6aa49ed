package daemon_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

const largestConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53", "[fd53::2]:53"]
  api: 127.0.0.1:9153
  bpffs: %s
zones:
  - origin: example.test.
    file: example.test.zone
records:
  - name: eight.example.test.
    type: A
    answers: [%s]
  - name: eight.example.test.
    type: AAAA
    answers: [%s]
aggregation:
  push_interval: 100ms
`

// TestLargestAnswersOverTheWire: sets of eight candidates, the most a
// reply carries, answered by XDP over a real veth. Eight AAAA answers grow
// the frame past what its headroom gives, so the program takes the rest
// from the tailroom, where the kernel's headroom alone serves eight A
// answers: both ways must give every address, with checksums the client's
// kernel accepts, over IPv4 and IPv6, with and without EDNS.
func TestLargestAnswersOverTheWire(t *testing.T) {
	var a4, a6, want4, want6 []string
	for i := 1; i <= 8; i++ {
		want4 = append(want4, fmt.Sprintf("198.18.2.%d", i))
		want6 = append(want6, fmt.Sprintf("fd53:2::%d", i))
		a4 = append(a4, fmt.Sprintf("{value: %s}", want4[i-1]))
		a6 = append(a6, fmt.Sprintf(`{value: "%s"}`, want6[i-1]))
	}
	slices.Sort(want4)
	slices.Sort(want6)
	env := testenv.Start(t, testenv.Options{})
	e := serve(t, env, func(link, pins string) string {
		return fmt.Sprintf(largestConfig, link, pins, strings.Join(a4, ", "), strings.Join(a6, ", "))
	})
	for _, c := range []struct {
		server string
		qtype  uint16
		edns   bool
		want   []string
	}{
		{"198.18.0.2:53", dns.TypeA, false, want4},
		{"198.18.0.2:53", dns.TypeAAAA, false, want6},
		{"198.18.0.2:53", dns.TypeAAAA, true, want6},
		{"[fd53::2]:53", dns.TypeA, true, want4},
		{"[fd53::2]:53", dns.TypeAAAA, false, want6},
		{"[fd53::2]:53", dns.TypeAAAA, true, want6},
	} {
		what := fmt.Sprintf("%s to %s, EDNS %v", dns.TypeToString[c.qtype], c.server, c.edns)
		m := q("eight.example.test.", c.qtype)
		if c.edns {
			m.SetEdns0(1232, false)
		}
		// The daemon loads its records before it serves, but a first
		// query may still race the XDP attach: ask until XDP answers.
		deadline := time.Now().Add(2 * time.Second)
		for {
			x0, _ := e.paths(t)
			var r *dns.Msg
			err := env.Client.Do(func() error {
				cl := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
				var err error
				r, _, err = cl.Exchange(m, c.server)
				return err
			})
			x1, _ := e.paths(t)
			if err == nil && x1 == x0+1 {
				if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 8 || !slices.Equal(addrs(r), c.want) {
					t.Fatalf("%s: got rcode %d, aa %v, answers %v, want %v", what, r.Rcode, r.Authoritative, addrs(r), c.want)
				}
				if (r.IsEdns0() != nil) != c.edns {
					t.Fatalf("%s: reply has OPT %v", what, r.IsEdns0() != nil)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no answer from XDP (last error %v)", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
