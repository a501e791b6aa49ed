package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

const unboundZone = `$ORIGIN example.test.
$TTL 300
@    SOA  ns hostmaster 1 3600 600 86400 1
@    NS   ns
@    MX   10 mail
@    TXT  "v=spf1 -all"
ns   A    198.18.0.2
mail A    198.18.0.25
`

const unboundConfig = `server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0}
zones:
  - origin: example.test.
    file: example.test.zone
    dnssec:
      keys: keys
      split: true
      # A rollover in seconds: Unbound caches nothing past a second.
      dnskey_ttl: 1s
      max_ttl: 1s
      propagation: 2s
health_checks:
  a: { type: tcp, target: 198.18.1.1, port: 80, interval: 200ms, timeout: 150ms, unhealthy_threshold: 1, healthy_threshold: 1 }
  b: { type: tcp, target: 198.18.1.2, port: 80, interval: 200ms, timeout: 150ms, unhealthy_threshold: 1, healthy_threshold: 1 }
records:
  - name: www.example.test.
    type: A
    ttl: 1
    policy: failover
    answers:
      - { value: 198.18.1.1, check: a, priority: 1 }
      - { value: 198.18.1.2, check: b, priority: 2 }
  - name: multi.example.test.
    type: A
    ttl: 1
    answers:
      - { value: 198.18.1.1, check: a }
      - { value: 198.18.1.2, check: b }
  - name: weighted.example.test.
    type: A
    ttl: 1
    policy: weighted
    max_answers: 1
    answers:
      - { value: 198.18.1.1, check: a, weight: 1 }
      - { value: 198.18.1.2, check: b, weight: 0 }
  - name: rr.example.test.
    type: A
    ttl: 1
    policy: round_robin
    answers:
      - { value: 198.18.1.1, check: a }
      - { value: 198.18.1.2, check: b }
  - name: nd.example.test.
    type: A
    ttl: 1
    when_all_down: nodata
    answers:
      - { value: 198.18.1.1, check: a }
aggregation:
  push_interval: 100ms
`

// TestUnboundValidates serves a zone signed online to a real Unbound that
// holds its DS as trust anchor and has steadydns as its stub. Through a
// backend's death and return, under failover, multivalue, weighted (its
// weight 0 drawn only alone) and round_robin, every answer validates
// (AD), follows health and comes from XDP; so do the zone's MX and TXT,
// NODATA and NXDOMAIN, answered as black lies, and the NODATA of a set
// whose backends are all down, from XDP. Then the ZSK is rolled over from
// the CLI and a SIGHUP: every answer through each phase validates, the
// DNSKEY set and the signing key go through the phases in order, and the
// answers after it come from XDP.
func TestUnboundValidates(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	unbound, err := exec.LookPath("unbound")
	if err != nil {
		t.Fatalf("finding unbound: %v (scripts/deps.sh installs Debian's package)", err)
	}
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 2})

	// The backends' health: a listener on port 80 that the test closes.
	listen := func(i int) net.Listener {
		var ln net.Listener
		if err := env.Backends[i].Do(func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf("198.18.1.%d:80", i+1))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return ln
	}
	lns := []net.Listener{listen(0), listen(1)}
	t.Cleanup(func() {
		for _, ln := range lns {
			ln.Close()
		}
	})

	e := newEdgeHost(t, env, bin, unboundConfig, map[string]string{"example.test.zone": unboundZone})
	cfg := e.cfg
	out, err := exec.Command(bin, "dnssec", "keygen", "--config", cfg, "--zone", "example.test").CombinedOutput()
	if err != nil {
		t.Fatalf("dnssec keygen: %v\n%s", err, out)
	}
	keygen := strings.Split(string(out), "\n") // the KSK, then the ZSK
	ds, err := exec.Command(bin, "dnssec", "ds", "--config", cfg, "--zone", "example.test").Output()
	if err != nil {
		t.Fatalf("dnssec ds: %v", err)
	}
	srv := e.serve("serve")
	waitServing(t, env)

	// Unbound on the client host, validating with the DS as anchor and
	// caching nothing past a second, so that it follows health.
	ucfg := filepath.Join(e.dir, "unbound.conf")
	if err := os.WriteFile(ucfg, []byte(fmt.Sprintf(`server:
  interface: 127.0.0.1@5353
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "%s"
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 1
  val-log-level: 2
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: yes
  qname-minimisation: no
  cache-max-ttl: 1
  cache-max-negative-ttl: 1
  module-config: "validator iterator"
  trust-anchor: "%s"
  # RFC 6761 names are served empty by default.
  local-zone: "test." nodefault
stub-zone:
  name: "example.test."
  stub-addr: 198.18.0.2
`, e.dir, strings.TrimSpace(string(ds)))), 0o644); err != nil {
		t.Fatal(err)
	}
	ub := env.Client.Command(unbound, "-d", "-c", ucfg)
	ulog, err := os.Create(filepath.Join(e.dir, "unbound.log"))
	if err != nil {
		t.Fatal(err)
	}
	ub.Stdout, ub.Stderr = ulog, ulog
	if err := ub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ub.Process.Kill()
		ub.Wait()
		ulog.Close()
		if t.Failed() {
			b, _ := os.ReadFile(ulog.Name())
			t.Logf("unbound's log:\n%s", b)
		}
	})

	// resolve asks Unbound, with DO, and returns the rcode, AD and the
	// answer's data of qtype, sorted.
	resolve := func(name string, qtype uint16) (int, bool, []string, error) {
		var r *dns.Msg
		err := env.Client.Do(func() (err error) {
			q := new(dns.Msg).SetQuestion(name, qtype)
			q.SetEdns0(1232, true)
			r, _, err = (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, "127.0.0.1:5353")
			return err
		})
		if err != nil {
			return 0, false, nil, err
		}
		var data []string
		for _, rr := range r.Answer {
			if rr.Header().Rrtype == qtype {
				data = append(data, strings.TrimPrefix(rr.String(), rr.Header().String()))
			}
		}
		slices.Sort(data)
		return r.Rcode, r.AuthenticatedData, data, nil
	}
	// expect polls until Unbound answers name with rcode and want,
	// validated.
	expect := func(what, name string, qtype uint16, rcode int, want ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, ad, data, err := resolve(name, qtype)
			if err == nil && got == rcode && ad && slices.Equal(data, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s %s: rcode %s AD %v %v (%v), want %s AD with %v", what, name, dns.TypeToString[qtype],
					dns.RcodeToString[got], ad, data, err, dns.RcodeToString[rcode], want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// xdpAnswered is how many answers XDP has sent: Unbound asks with
	// DO=1, so the health-checked answers it validates come from XDP,
	// signed ahead, once their signatures are made.
	xdpCount := func(outcome string) float64 {
		for _, l := range strings.Split(getText(t, env, "/metrics"), "\n") {
			if v, found := strings.CutPrefix(l, `steadydns_queries_total{outcome="`+outcome+`",path="xdp"} `); found {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		return 0
	}
	xdpAnswered := func() float64 { return xdpCount("answered") }
	// fromXDP expects the answers of name, validated, to come from XDP.
	fromXDP := func(what, name string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			before := xdpAnswered()
			_, ad, data, err := resolve(name, dns.TypeA)
			if err == nil && ad && slices.Equal(data, want) && xdpAnswered() > before {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s: AD %v %v (%v), XDP answered %v: want %v validated from XDP", what, name, ad, data, err, xdpAnswered(), want)
			}
			time.Sleep(1100 * time.Millisecond) // past Unbound's cache
		}
	}

	ok := dns.RcodeSuccess
	expect("both up", "www.example.test.", dns.TypeA, ok, "198.18.1.1")
	fromXDP("both up", "www.example.test.", "198.18.1.1")
	fromXDP("both up", "multi.example.test.", "198.18.1.1", "198.18.1.2")
	fromXDP("both up", "weighted.example.test.", "198.18.1.1")
	fromXDP("both up", "rr.example.test.", "198.18.1.1", "198.18.1.2")
	expect("both up", "multi.example.test.", dns.TypeA, ok, "198.18.1.1", "198.18.1.2")
	expect("zone data", "example.test.", dns.TypeMX, ok, "10 mail.example.test.")
	expect("zone data", "example.test.", dns.TypeTXT, ok, `"v=spf1 -all"`)
	expect("zone data", "mail.example.test.", dns.TypeA, ok, "198.18.0.25")
	expect("nodata", "mail.example.test.", dns.TypeAAAA, ok)
	expect("nodata of a health-checked name", "www.example.test.", dns.TypeTXT, ok)
	expect("nxdomain", "nothere.example.test.", dns.TypeA, ok)

	lns[0].Close() // the primary dies
	expect("primary down", "www.example.test.", dns.TypeA, ok, "198.18.1.2")
	expect("primary down", "multi.example.test.", dns.TypeA, ok, "198.18.1.2")
	fromXDP("primary down", "www.example.test.", "198.18.1.2")
	fromXDP("primary down", "multi.example.test.", "198.18.1.2")
	fromXDP("primary down", "weighted.example.test.", "198.18.1.2")
	fromXDP("primary down", "rr.example.test.", "198.18.1.2")
	// nd's only backend is down: its NODATA, signed ahead, from XDP.
	for deadline := time.Now().Add(30 * time.Second); ; {
		before := xdpCount("nodata")
		rcode, ad, data, err := resolve("nd.example.test.", dns.TypeA)
		if err == nil && rcode == ok && ad && len(data) == 0 && xdpCount("nodata") > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nd: rcode %s AD %v %v (%v), XDP NODATA %v: want a validated NODATA from XDP", dns.RcodeToString[rcode], ad, data, err, xdpCount("nodata"))
		}
		time.Sleep(1100 * time.Millisecond) // past Unbound's cache
	}

	lns[0] = listen(0) // and returns
	expect("primary back", "www.example.test.", dns.TypeA, ok, "198.18.1.1")
	expect("primary back", "multi.example.test.", dns.TypeA, ok, "198.18.1.1", "198.18.1.2")
	fromXDP("primary back", "multi.example.test.", "198.18.1.1", "198.18.1.2")
	fromXDP("primary back", "weighted.example.test.", "198.18.1.1")
	fromXDP("primary back", "rr.example.test.", "198.18.1.1", "198.18.1.2")

	// keyPhase asks steadydns itself for the DNSKEY set's tags and the
	// key that signs a health-checked answer and zone data.
	keyPhase := func() string {
		tags := func(name string, qtype uint16) []string {
			var r *dns.Msg
			if err := env.Client.Do(func() (err error) {
				q := new(dns.Msg).SetQuestion(name, qtype)
				q.SetEdns0(1232, true)
				r, _, err = (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, "198.18.0.2:53")
				return err
			}); err != nil {
				t.Fatalf("asking steadydns for %s: %v", name, err)
			}
			var out []string
			for _, rr := range r.Answer {
				switch rr := rr.(type) {
				case *dns.DNSKEY:
					if rr.Flags&dns.SEP == 0 {
						out = append(out, fmt.Sprint(rr.KeyTag()))
					}
				case *dns.RRSIG:
					if rr.TypeCovered != dns.TypeDNSKEY {
						out = append(out, fmt.Sprint(rr.KeyTag))
					}
				}
			}
			slices.Sort(out)
			return out
		}
		return fmt.Sprintf("ZSKs %v, www signed by %v, mail by %v", tags("example.test.", dns.TypeDNSKEY),
			tags("www.example.test.", dns.TypeA), tags("mail.example.test.", dns.TypeA))
	}
	oldZSK := strings.Fields(keygen[1])[1]
	status, err := exec.Command(bin, "dnssec", "rollover", "--config", cfg, "--zone", "example.test").Output()
	if err != nil {
		t.Fatalf("dnssec rollover: %v", err)
	}
	var newZSK string
	var deleted time.Time
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 3 && f[0] == "ZSK" && f[3] == "published":
			newZSK = f[1]
		case len(f) > 5 && f[0] == "ZSK" && f[1] == oldZSK && f[4] == "inactive":
			// Inactive now plus max_ttl and propagation.
			at, err := time.Parse(time.DateTime, f[5]+" "+f[6])
			if err != nil {
				t.Fatal(err)
			}
			deleted = at.Add(3 * time.Second)
		}
	}
	if newZSK == "" || deleted.IsZero() {
		t.Fatalf("dnssec rollover printed\n%s\nwant a ZSK published and %s inactive", status, oldZSK)
	}
	if err := srv.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Through every phase and past the old key's deletion, each answer
	// validates, and the phases follow one another.
	var phases []string
	for time.Now().Before(deleted.Add(2 * time.Second)) {
		for _, q := range []struct {
			name  string
			qtype uint16
			want  []string
		}{
			{"www.example.test.", dns.TypeA, []string{"198.18.1.1"}},
			{"mail.example.test.", dns.TypeA, []string{"198.18.0.25"}},
			{"nothere.example.test.", dns.TypeA, nil},
		} {
			rcode, ad, data, err := resolve(q.name, q.qtype)
			if err != nil || rcode != ok || !ad || !slices.Equal(data, q.want) {
				t.Fatalf("during the ZSK rollover (%v): %s: rcode %s AD %v %v (%v), want NOERROR AD with %v", phases,
					q.name, dns.RcodeToString[rcode], ad, data, err, q.want)
			}
		}
		if p := keyPhase(); len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
	both := []string{oldZSK, newZSK}
	slices.Sort(both)
	want := []string{
		fmt.Sprintf("ZSKs %v, www signed by [%s], mail by [%s]", both, oldZSK, oldZSK),
		fmt.Sprintf("ZSKs %v, www signed by [%s], mail by [%s]", both, newZSK, newZSK),
		fmt.Sprintf("ZSKs [%s], www signed by [%s], mail by [%s]", newZSK, newZSK, newZSK),
	}
	if phases[0] == fmt.Sprintf("ZSKs [%s], www signed by [%s], mail by [%s]", oldZSK, oldZSK, oldZSK) {
		phases = phases[1:] // asked before the reload
	}
	if !slices.Equal(phases, want) {
		t.Fatalf("the ZSK rollover went through\n%s\nwant\n%s", strings.Join(phases, "\n"), strings.Join(want, "\n"))
	}
	// With the old key gone, XDP's entries were signed anew at the key
	// events, not left to the fallback.
	fromXDP("after the ZSK rollover", "www.example.test.", "198.18.1.1")
	fromXDP("after the ZSK rollover", "multi.example.test.", "198.18.1.1", "198.18.1.2")
}
