package daemon_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

// identityConfig answers id.server, refuses version.server, and answers
// the debug name to the client's IPv4 address alone.
const identityConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53", "[fd53::2]:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  id_server: true
  version_server: false
  debug:
    name: _debug.steadydns.
    allow: [%s/32]
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, interval: 1m }
  web2: { type: tcp, target: 198.18.1.2, port: 80, interval: 1m }
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2, check: web2}]
aggregation:
  push_interval: 100ms
`

func chaos(name string, class uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeTXT)
	m.Question[0].Qclass = class
	return m
}

func txts(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		if t, ok := rr.(*dns.TXT); ok {
			out = append(out, t.Txt...)
		}
	}
	return out
}

// TestIdentityOverTheWire: id.server and version.server CH TXT follow
// their switches, and the debug name explains a record to an allowed
// client and is refused to any other.
func TestIdentityOverTheWire(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	e := serve(t, env, func(link, pins string) string { return fmt.Sprintf(identityConfig, link, pins, env.Client.V4) })
	v4, v6 := "198.18.0.2:53", "[fd53::2]:53"

	// The daemon runs without --id: its id is the host name.
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id.server.", "ID.SERVER.", "hostname.bind."} {
		r := e.ask(t, "udp", v4, chaos(name, dns.ClassCHAOS))
		if got := txts(r); r.Rcode != dns.RcodeSuccess || len(got) != 1 || got[0] != host || r.Answer[0].Header().Class != dns.ClassCHAOS {
			t.Errorf("%s CH TXT: rcode %s %v, want the host's id %q", name, dns.RcodeToString[r.Rcode], got, host)
		}
	}
	for _, name := range []string{"version.server.", "version.bind."} {
		if r := e.ask(t, "udp", v4, chaos(name, dns.ClassCHAOS)); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("%s CH TXT with version_server: false: rcode %s %v, want REFUSED", name, dns.RcodeToString[r.Rcode], txts(r))
		}
	}

	t.Run("debug", func(t *testing.T) {
		admin(t, e, "web1", "down")
		waitAnswer(t, e, "web1 down", []string{"198.18.1.2"}, 2*time.Second)
		// The checker's first frame may come after the override.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !slices.ContainsFunc(txts(e.ask(t, "udp", v4, chaos("www.example.test._debug.steadydns.", dns.ClassINET))),
			func(s string) bool { return strings.Contains(s, " "+host+"=") }) {
			time.Sleep(50 * time.Millisecond)
		}
		for _, class := range []uint16{dns.ClassINET, dns.ClassCHAOS} {
			r := e.ask(t, "udp", v4, chaos("WWW.example.test._debug.steadydns.", class))
			got := txts(r)
			if r.Rcode != dns.RcodeSuccess || len(got) != 5 || !strings.HasPrefix(got[0], "table version=") {
				t.Fatalf("debug TXT class %s: rcode %s %q", dns.ClassToString[class], dns.RcodeToString[r.Rcode], got)
			}
			// The checks' votes follow: the one checker, this host, with no
			// region, votes what its probes say whatever the override.
			for i, want := range []string{
				"A 198.18.1.1 check=web1 healthy=no in=no reason=unhealthy: admin_down",
				"A 198.18.1.2 check=web2 healthy=yes in=yes reason=healthy: ",
				"check web1 votes healthy=",
				"check web2 votes healthy=",
			} {
				if !strings.HasPrefix(got[i+1], want) {
					t.Errorf("debug TXT class %s line %d: %q, want %q…", dns.ClassToString[class], i+1, got[i+1], want)
				}
			}
			if !strings.Contains(got[3], " "+host+"=") {
				t.Errorf("debug TXT class %s: %q, want the vote of checker %s", dns.ClassToString[class], got[3], host)
			}
		}
		// The same client over IPv6 is outside the allowed prefixes.
		r := e.ask(t, "udp", v6, chaos("www.example.test._debug.steadydns.", dns.ClassINET))
		if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("debug TXT from %s: rcode %s %q, want REFUSED", env.Client.V6, dns.RcodeToString[r.Rcode], txts(r))
		}
		// TCP goes by the same rules.
		r = e.ask(t, "tcp", v6, chaos("www.example.test._debug.steadydns.", dns.ClassINET))
		if r.Rcode != dns.RcodeRefused {
			t.Errorf("debug TXT over tcp from %s: rcode %s, want REFUSED", env.Client.V6, dns.RcodeToString[r.Rcode])
		}
	})
}
