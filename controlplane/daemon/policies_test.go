package daemon_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/testenv"
)

const policyConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53", "[fd53::2]:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  geo:
    regions:
      eu: { prefixes: ["198.18.0.0/25"], next: [us] }
      us: { prefixes: ["198.18.0.128/25"], next: [eu] }
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  a: { type: tcp, target: 198.18.1.1, port: 80 }
  b: { type: tcp, target: 198.18.1.2, port: 80 }
  c: { type: tcp, target: 198.18.1.3, port: 80 }
records:
  - name: backup.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: a}, {value: 198.18.1.2, check: b, backup: true}]
  - name: minh.example.test.
    type: A
    min_healthy: 2
    answers: [{value: 198.18.1.1, check: a}, {value: 198.18.1.2, check: b}, {value: 198.18.1.3, check: c}]
  - name: nodata.example.test.
    type: A
    when_all_down: nodata
    answers: [{value: 198.18.1.1, check: a}, {value: 198.18.1.2, check: b}]
  - name: servfail.example.test.
    type: A
    when_all_down: servfail
    answers: [{value: 198.18.1.1, check: a}, {value: 198.18.1.2, check: b}]
  - name: degraded.example.test.
    type: A
    ttl: 300
    ttl_degraded: 10
    answers: [{value: 198.18.1.1, check: a}, {value: 198.18.1.2, check: c}]
  - name: geo.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: a, region: eu}, {value: 198.18.1.2, check: c, region: us}]
aggregation:
  push_interval: 100ms
`

// TestPoliciesOverTheWire: backup, min_healthy, when_all_down,
// ttl_degraded and geo, end to end from clients in two prefixes, with
// checks forced down through the API.
func TestPoliciesOverTheWire(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	// A second client address, in the us prefix.
	if err := env.Client.Do(func() error {
		l, err := netlink.LinkByName(env.Client.Link)
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("198.18.0.200/24")
		a.Flags = unix.IFA_F_NODAD
		return netlink.AddrAdd(l, a)
	}); err != nil {
		t.Fatal(err)
	}
	e := serve(t, env, func(link, pins string) string { return fmt.Sprintf(policyConfig, link, pins) })
	api := e.api(t)

	admin := func(check, state string) {
		req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/"+check+"/admin", strings.NewReader(state))
		resp, err := api.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("setting %s %s: %v %v", check, state, resp, err)
		}
		resp.Body.Close()
	}
	askFrom := func(src, name string, mutate func(*dns.Msg)) *dns.Msg {
		m := q(name, dns.TypeA)
		if mutate != nil {
			mutate(m)
		}
		var r *dns.Msg
		err := env.Client.Do(func() error {
			c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
			var err error
			r, _, err = c.Exchange(m, "198.18.0.2:53")
			return err
		})
		if err != nil {
			t.Fatalf("%s from %s: %v", name, src, err)
		}
		return r
	}
	// expect waits up to five seconds, for a change that never comes and
	// not for a loaded machine, for the reply to satisfy ok, and checks
	// that XDP sent it.
	expect := func(what, src, name string, mutate func(*dns.Msg), viaXDP bool, ok func(*dns.Msg) bool) {
		t.Helper()
		start := time.Now()
		for {
			x0, _ := e.paths(t)
			r := askFrom(src, name, mutate)
			x1, _ := e.paths(t)
			if ok(r) && (x1 == x0+1) == viaXDP {
				return
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: %s from %s got %v (xdp %v), want otherwise", what, name, src, r, x1 == x0+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	is := func(want ...string) func(*dns.Msg) bool {
		return func(r *dns.Msg) bool { return r.Rcode == dns.RcodeSuccess && slices.Equal(addrs(r), want) }
	}
	eu, us := "198.18.0.1", "198.18.0.200"

	expect("backup held back", eu, "backup.example.test.", nil, true, is("198.18.1.1"))
	expect("geo eu client", eu, "geo.example.test.", nil, true, is("198.18.1.1"))
	expect("geo us client", us, "geo.example.test.", nil, true, is("198.18.1.2"))
	expect("ttl while healthy", eu, "degraded.example.test.", nil, true, func(r *dns.Msg) bool { return len(r.Answer) == 2 && r.Answer[0].Header().Ttl == 300 })
	withECS := func(subnet string) func(*dns.Msg) {
		return func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.ParseIP(subnet).To4()})
		}
	}
	// ECS for the us /25 from the eu client: the fallback steers by it,
	// and says the /25 decided.
	expect("ecs steers", eu, "geo.example.test.", withECS("198.18.0.130"), false, func(r *dns.Msg) bool {
		if !is("198.18.1.2")(r) {
			return false
		}
		for _, o := range r.IsEdns0().Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				return s.SourceScope == 25
			}
		}
		return false
	})

	admin("a", "down")
	expect("backup takes over", eu, "backup.example.test.", nil, true, is("198.18.1.2"))
	expect("min_healthy met", eu, "minh.example.test.", nil, true, is("198.18.1.2", "198.18.1.3"))
	expect("geo fails over to us", eu, "geo.example.test.", nil, true, is("198.18.1.2"))
	expect("ttl_degraded", eu, "degraded.example.test.", nil, true, func(r *dns.Msg) bool {
		return slices.Equal(addrs(r), []string{"198.18.1.2"}) && r.Answer[0].Header().Ttl == 10
	})

	admin("b", "down")
	expect("min_healthy fails open", eu, "minh.example.test.", nil, true, is("198.18.1.1", "198.18.1.2", "198.18.1.3"))
	expect("nodata from xdp", eu, "nodata.example.test.", nil, true, func(r *dns.Msg) bool {
		return r.Rcode == dns.RcodeSuccess && r.Authoritative && len(r.Answer) == 0 && len(r.Ns) == 1 && r.Ns[0].(*dns.SOA).Minttl == 300
	})
	expect("servfail from xdp", eu, "servfail.example.test.", nil, true, func(r *dns.Msg) bool {
		return r.Rcode == dns.RcodeServerFailure && !r.Authoritative && len(r.Answer) == 0
	})
	// Both paths agree on the NODATA: over TCP the fallback answers it.
	var tcp *dns.Msg
	if err := env.Client.Do(func() (err error) {
		tcp, _, err = (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(q("nodata.example.test.", dns.TypeA), "198.18.0.2:53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if tcp.Rcode != dns.RcodeSuccess || len(tcp.Answer) != 0 || len(tcp.Ns) != 1 || tcp.Ns[0].Header().Ttl != 300 {
		t.Errorf("fallback NODATA over tcp: %v", tcp)
	}
	admin("a", "auto")
	expect("backup held back again", eu, "backup.example.test.", nil, true, is("198.18.1.1"))
}
