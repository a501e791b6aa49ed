package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/testenv"
)

const zoneFile = `$ORIGIN example.test.
$TTL 3600
@       SOA  ns1 hostmaster 1 7200 3600 1209600 300
@       NS   ns1
ns1     A    198.18.0.2
@       MX   10 mail
mail    A    198.18.1.10
static  A    198.18.1.20
static  A    198.18.1.21
`

// configFile turns rate limiting off: restartUnderLoad's client asks one
// name without pause and every query must be answered. rrlConfig turns
// it on.
const configFile = `server:
  interfaces: [%s]
  xdp_mode: %s
  listen: ["198.18.0.2:53", "[fd53::2]:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  rrl: {rate: 0}
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80 }
  web2: { type: tcp, target: 198.18.1.2, port: 80 }
records:
  - name: www.example.test.
    type: A
    ttl: 30
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web2 }
  - name: www.example.test.
    type: AAAA
    ttl: 30
    answers:
      - { value: "fd53:1::1", check: web1 }
      - { value: "fd53:1::2", check: web2 }
aggregation:
  push_interval: 100ms
`

// edge is a daemon serving in the edge host of a test environment.
type edge struct {
	env *testenv.Env
	d   *daemon.Daemon
	cfg string
}

func startEdge(t *testing.T, mode string) *edge {
	env := testenv.Start(t, testenv.Options{})
	return serve(t, env, func(link, pins string) string { return fmt.Sprintf(configFile, link, mode, pins) })
}

// serve runs a daemon in env's edge host, with the config that config
// makes for the edge's link and a private pin directory: XDP in native
// mode needs the pass program on the client's side, and a private bpffs
// keeps tests off a real server's pins.
func serve(t testing.TB, env *testenv.Env, config func(link, pins string) string) *edge {
	return serveAs(t, env, config, daemon.Identity{})
}

// serveAs is serve for a host with an identity in a fleet.
func serveAs(t testing.TB, env *testenv.Env, config func(link, pins string) string, id daemon.Identity) *edge {
	return serveFiles(t, env, id, func(dir, link, pins string) string {
		cfg := filepath.Join(dir, "steadydns.yaml")
		write(t, filepath.Join(dir, "example.test.zone"), zoneFile)
		write(t, cfg, withState(config(link, pins), filepath.Join(dir, "state")))
		return cfg
	})
}

// serveFiles runs a daemon in env's edge host on the config that files
// writes into dir, for the edge's link and pin directory, and returns
// the config's path.
func serveFiles(t testing.TB, env *testenv.Env, id daemon.Identity, files func(dir, link, pins string) string) *edge {
	var pass bpf.PassObjects
	if err := bpf.LoadPassObjects(&pass, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pass.Close() })
	if err := env.AttachPass(pass.XdpPass); err != nil {
		t.Fatal(err)
	}
	pins := t.TempDir()
	if err := unix.Mount("bpf", pins, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(pins, unix.MNT_DETACH) })
	cfg := files(t.TempDir(), env.Edge.Link, pins+"/sd")

	e := &edge{env: env, cfg: cfg}
	err := env.Edge.Do(func() (err error) {
		e.d, err = daemon.StartWith(cfg, daemon.Options{Netns: env.Edge.Do, Identity: id})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("closing the daemon: %v", err)
		}
	})
	return e
}

// withState puts the state file of cfg in dir: the default is shared by
// every server on the host, and each test is a server of its own.
func withState(cfg, dir string) string {
	return strings.Replace(cfg, "server:\n", "server:\n  state_dir: "+dir+"\n", 1)
}

func write(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ask sends one query from the client host.
func (e *edge) ask(t testing.TB, proto string, server string, m *dns.Msg) *dns.Msg {
	t.Helper()
	var r *dns.Msg
	err := e.env.Client.Do(func() error {
		c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
		var err error
		r, _, err = c.Exchange(m, server)
		return err
	})
	if err != nil {
		t.Fatalf("querying %s %s over %s: %v", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], proto, err)
	}
	return r
}

func q(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func addrs(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

// paths returns the XDP answered count and the fallback's total.
func (e *edge) paths(t testing.TB) (xdp, fallback uint64) {
	t.Helper()
	counts, err := e.d.XDPOutcomes()
	if err != nil {
		t.Fatal(err)
	}
	m := e.d.Metrics()
	for _, o := range []string{"noerror", "nxdomain", "nodata", "referral", "refused", "formerr", "notimp", "servfail", "badvers", "truncated"} {
		fallback += m.FallbackCount(o)
	}
	return counts["answered"] + counts["nodata"] + counts["servfail"], fallback
}

func TestEndToEnd(t *testing.T) {
	for _, mode := range []string{"native", "generic"} {
		t.Run(mode, func(t *testing.T) { endToEnd(t, mode) })
	}
}

func endToEnd(t *testing.T, mode string) {
	e := startEdge(t, mode)
	v4, v6 := "198.18.0.2:53", "[fd53::2]:53"

	t.Run("A and AAAA by xdp", func(t *testing.T) {
		for _, c := range []struct {
			server string
			qtype  uint16
			want   []string
		}{
			{v4, dns.TypeA, []string{"198.18.1.1", "198.18.1.2"}},
			{v4, dns.TypeAAAA, []string{"fd53:1::1", "fd53:1::2"}},
			{v6, dns.TypeA, []string{"198.18.1.1", "198.18.1.2"}},
			{v6, dns.TypeAAAA, []string{"fd53:1::1", "fd53:1::2"}},
		} {
			x0, f0 := e.paths(t)
			r := e.ask(t, "udp", c.server, q("WWW.example.test.", c.qtype))
			x1, f1 := e.paths(t)
			if got := addrs(r); !slices.Equal(got, c.want) || !r.Authoritative || r.Rcode != dns.RcodeSuccess {
				t.Errorf("%s %s: %v aa=%v rcode=%d, want %v aa", c.server, dns.TypeToString[c.qtype], got, r.Authoritative, r.Rcode, c.want)
			}
			if r.Question[0].Name != "WWW.example.test." {
				t.Errorf("question case changed to %s", r.Question[0].Name)
			}
			if x1 != x0+1 || f1 != f0 {
				t.Errorf("%s %s: xdp counter moved %d, fallback %d; want 1 and 0", c.server, dns.TypeToString[c.qtype], x1-x0, f1-f0)
			}
		}
		// A static zone-file set is in the kernel too.
		x0, _ := e.paths(t)
		if got := addrs(e.ask(t, "udp", v4, q("static.example.test.", dns.TypeA))); !slices.Equal(got, []string{"198.18.1.20", "198.18.1.21"}) {
			t.Errorf("static A: %v", got)
		}
		if x1, _ := e.paths(t); x1 != x0+1 {
			t.Errorf("static A was not answered by xdp")
		}
	})

	t.Run("the rest by the fallback", func(t *testing.T) {
		badvers := q("www.example.test.", dns.TypeA)
		badvers.SetEdns0(1232, false)
		badvers.IsEdns0().SetVersion(1)
		for _, c := range []struct {
			name  string
			net   string
			m     *dns.Msg
			rcode int
			check func(*dns.Msg) error
		}{
			{"SOA", "udp", q("example.test.", dns.TypeSOA), dns.RcodeSuccess, func(r *dns.Msg) error {
				return want(len(r.Answer) == 1 && r.Answer[0].Header().Rrtype == dns.TypeSOA, "one SOA")
			}},
			{"MX", "udp", q("example.test.", dns.TypeMX), dns.RcodeSuccess, func(r *dns.Msg) error {
				return want(len(r.Answer) == 1 && r.Answer[0].(*dns.MX).Mx == "mail.example.test.", "MX mail")
			}},
			{"NXDOMAIN", "udp", q("nope.example.test.", dns.TypeA), dns.RcodeNameError, func(r *dns.Msg) error {
				return want(len(r.Ns) == 1 && r.Ns[0].Header().Rrtype == dns.TypeSOA, "SOA in authority")
			}},
			{"NODATA at a dynamic name", "udp", q("www.example.test.", dns.TypeMX), dns.RcodeSuccess, func(r *dns.Msg) error {
				return want(len(r.Answer) == 0 && len(r.Ns) == 1, "no answer, SOA in authority")
			}},
			{"ANY", "udp", q("www.example.test.", dns.TypeANY), dns.RcodeSuccess, func(r *dns.Msg) error {
				return want(len(r.Answer) == 1 && r.Answer[0].Header().Rrtype == dns.TypeHINFO, "RFC 8482 HINFO")
			}},
			{"A over TCP", "tcp", q("www.example.test.", dns.TypeA), dns.RcodeSuccess, func(r *dns.Msg) error { return want(len(addrs(r)) == 2, "two addresses") }},
			{"BADVERS", "udp", badvers, dns.RcodeBadVers, func(r *dns.Msg) error {
				o := r.IsEdns0()
				return want(o != nil && o.Version() == 0 && len(r.Answer) == 0, "OPT version 0, no answer")
			}},
		} {
			x0, f0 := e.paths(t)
			r := e.ask(t, c.net, v4, c.m)
			x1, f1 := e.paths(t)
			if r.Rcode != c.rcode {
				t.Errorf("%s: rcode %s, want %s", c.name, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if err := c.check(r); err != nil {
				t.Errorf("%s: %v\n%v", c.name, err, r)
			}
			if x1 != x0 || f1 != f0+1 {
				t.Errorf("%s: xdp counter moved %d, fallback %d; want 0 and 1", c.name, x1-x0, f1-f0)
			}
		}
	})

	t.Run("admin down changes the answer within a second", func(t *testing.T) {
		client := e.api(t)
		put := func(state string) {
			req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/web1/admin", strings.NewReader(state))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("PUT admin %s: %s", state, resp.Status)
			}
		}
		for _, c := range []struct {
			state string
			want  []string
		}{
			{"down", []string{"198.18.1.2"}},
			{"auto", []string{"198.18.1.1", "198.18.1.2"}},
		} {
			start := time.Now()
			put(c.state)
			for {
				x0, _ := e.paths(t)
				got := addrs(e.ask(t, "udp", v4, q("www.example.test.", dns.TypeA)))
				x1, _ := e.paths(t)
				if slices.Equal(got, c.want) && x1 == x0+1 {
					break
				}
				// The change goes out with the next push; the deadline is
				// for one that never does, not for a loaded machine.
				if time.Since(start) > 5*time.Second {
					t.Fatalf("admin %s: answer still %v after 5s, want %v from xdp", c.state, got, c.want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("admin %s: answer changed after %v", c.state, time.Since(start).Round(time.Millisecond))
			// The API says why each candidate is in or out.
			var recs struct{ Records []api.RecordView }
			getAPI(t, e.env, "/api/v1/records", &recs)
			for _, r := range recs.Records {
				if r.Name != "www.example.test." || r.Type != "A" {
					continue
				}
				a := r.Answers[0]
				wantIn, wantReason := c.state != "down", "healthy: "
				if c.state == "down" {
					wantReason = "unhealthy: admin_down"
				}
				if a.Value != "198.18.1.1" || a.In != wantIn || !strings.HasPrefix(a.Reason, wantReason) {
					t.Errorf("admin %s: /api/v1/records says %+v, want in=%v reason %q", c.state, a, wantIn, wantReason)
				}
			}
		}
		// An unknown check and a bad state are refused.
		req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/nope/admin", strings.NewReader("down"))
		if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("PUT admin of an unknown check: %v %v, want 404", resp.Status, err)
		}
		req, _ = http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/web1/admin", strings.NewReader("sideways"))
		if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT admin sideways: %v %v, want 400", resp.Status, err)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := e.env.Edge.HTTPClient().Get("http://127.0.0.1:9153/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{`steadydns_queries_total{outcome="answered",path="xdp"}`, `steadydns_queries_total{outcome="noerror",path="fallback"}`, `steadydns_check_healthy{check="web1"} 1`, "steadydns_health_table_age_seconds"} {
			if !strings.Contains(string(b), s) {
				t.Errorf("metrics lack %s", s)
			}
		}
	})
}

func want(ok bool, what string) error {
	if ok {
		return nil
	}
	return fmt.Errorf("want %s", what)
}
