package daemon_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/testenv"
)

// An example's answers, one comment line each (examples/README.md):
//
//	#   [when COND[, COND]: ][from ADDR: ]NAME TYPE -> RESULT
//
// COND is "CHECK down" or "REGION shifted"; RESULT is the CNAME targets and addresses
// answered, "one of ADDR..." (a single answer, each of them seen over
// many queries), nodata or servfail.
var expectLine = regexp.MustCompile(`^#\s+(?:when ([^:]+): )?(?:from (\S+): )?(\S+) (A|AAAA|CNAME) -> (.+)$`)

type expectation struct {
	line    int
	down    []string
	shifted []string // regions shifted away
	from    string
	name    string
	qtype   uint16
	result  string
}

func (x expectation) String() string {
	return fmt.Sprintf("line %d: down %v shifted %v from %q: %s %s -> %s", x.line, x.down, x.shifted, x.from, x.name, dns.TypeToString[x.qtype], x.result)
}

func readExpectations(t *testing.T, path string) []expectation {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []expectation
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := expectLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		x := expectation{line: n, from: m[2], name: m[3], qtype: dns.StringToType[m[4]], result: m[5]}
		for _, cond := range strings.Split(m[1], ",") {
			if cond = strings.TrimSpace(cond); cond == "" {
				continue
			}
			if region, ok := strings.CutSuffix(cond, " shifted"); ok {
				x.shifted = append(x.shifted, region)
				continue
			}
			check, ok := strings.CutSuffix(cond, " down")
			if !ok {
				t.Fatalf("%s:%d: condition %q is not CHECK down or REGION shifted", path, n, cond)
			}
			x.down = append(x.down, check)
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no answers written down", path)
	}
	return out
}

// TestExamples runs each config of examples/policies as a user would on
// the hosts of `steadydns testenv up`, forces its checks' states through
// the API and requires the answers its comments promise, over UDP (XDP
// where it answers) and over TCP (the fallback).
func TestExamples(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	src := filepath.Join("..", "..", "examples", "policies")
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", src, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			runExample(t, src, path)
		})
	}
}

func runExample(t *testing.T, src, path string) {
	expect := readExpectations(t, path)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zones, err := filepath.Glob(filepath.Join(src, "*.zone"))
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{})
	e := serveFiles(t, env, daemon.Identity{}, func(dir, link, pins string) string {
		s := strings.Replace(string(text), "interfaces: [sde0]", "interfaces: ["+link+"]", 1)
		s = strings.Replace(s, "bpffs: /sys/fs/bpf/steadydns", "bpffs: "+pins, 1)
		for _, z := range zones {
			data, err := os.ReadFile(z)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, filepath.Base(z)), string(data))
		}
		cfg := filepath.Join(dir, "steadydns.yaml")
		write(t, cfg, withState(s, filepath.Join(dir, "state")))
		return cfg
	})
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The checks an override can set: a calculated check follows its
	// children, which is what its example shows.
	var forced []string
	for i := range cfg.Checks.Len() {
		if cfg.Checks.Type(i) != config.CheckCalculated {
			forced = append(forced, cfg.Checks.ID(i))
		}
	}
	api := e.api(t)
	admin := func(check, state string) {
		req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/checks/"+check+"/admin", strings.NewReader(state))
		resp, err := api.Do(req)
		if err != nil {
			t.Fatalf("setting %s %s: %v", check, state, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("setting %s %s: %s", check, state, resp.Status)
		}
	}
	// The regions some line shifts, shifted away or back for each line.
	var regions []string
	for _, x := range expect {
		for _, r := range x.shifted {
			if !slices.Contains(regions, r) {
				regions = append(regions, r)
			}
		}
	}
	shift := func(region string, away bool) {
		req, _ := http.NewRequest(http.MethodDelete, "http://127.0.0.1:9153/api/v1/shifts/"+region, nil)
		if away {
			req, _ = http.NewRequest(http.MethodPut, "http://127.0.0.1:9153/api/v1/shifts/"+region, strings.NewReader(`{"duration": "10m", "reason": "example"}`))
		}
		resp, err := api.Do(req)
		if err != nil {
			t.Fatalf("shifting %s away (%v): %v", region, away, err)
		}
		resp.Body.Close()
		// Cancelling a shift there is not is 404, and changes nothing.
		if resp.StatusCode != http.StatusNoContent && (away || resp.StatusCode != http.StatusNotFound) {
			t.Fatalf("shifting %s away (%v): %s", region, away, resp.Status)
		}
	}
	sources := map[string]bool{env.Client.V4.String(): true}
	for _, x := range expect {
		for _, r := range regions {
			shift(r, slices.Contains(x.shifted, r))
		}
		for _, c := range x.down {
			if !slices.Contains(forced, c) {
				t.Fatalf("%v: %q is no check of the example that an override sets", x, c)
			}
		}
		for _, c := range forced {
			admin(c, map[bool]string{true: "down", false: "up"}[slices.Contains(x.down, c)])
		}
		if x.from != "" && !sources[x.from] {
			addClientAddr(t, env, x.from)
			sources[x.from] = true
		}
		for _, proto := range []string{"udp", "tcp"} {
			waitAnswers(t, env, x, proto)
		}
	}
}

// waitAnswers polls until the answers match x, for the change the
// aggregator pushes: a deadline for a change that never comes, not for
// a loaded machine.
func waitAnswers(t *testing.T, env *testenv.Env, x expectation, proto string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := matches(env, x, proto)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v over %s: %v", x, proto, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func matches(env *testenv.Env, x expectation, proto string) error {
	ask := func() (*dns.Msg, error) {
		m := q(x.name, x.qtype)
		var r *dns.Msg
		err := env.Client.Do(func() error {
			c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
			if x.from != "" {
				ip := net.ParseIP(x.from)
				if proto == "udp" {
					c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: ip}}
				} else {
					c.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
				}
			}
			var err error
			r, _, err = c.Exchange(m, "198.18.0.2:53")
			return err
		})
		return r, err
	}
	switch want, oneOf := strings.CutPrefix(x.result, "one of "); {
	case oneOf:
		pool := strings.Fields(want)
		seen := map[string]bool{}
		for range 60 {
			r, err := ask()
			if err != nil {
				return err
			}
			got := addrs(r)
			if r.Rcode != dns.RcodeSuccess || len(got) != 1 || !slices.Contains(pool, got[0]) {
				return fmt.Errorf("got %s %v", dns.RcodeToString[r.Rcode], got)
			}
			seen[got[0]] = true
		}
		if len(seen) != len(pool) {
			return fmt.Errorf("60 answers drew only %v", seen)
		}
		return nil
	default:
		r, err := ask()
		if err != nil {
			return err
		}
		switch want {
		case "nodata":
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
				return fmt.Errorf("got %s with %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
			}
		case "servfail":
			if r.Rcode != dns.RcodeServerFailure {
				return fmt.Errorf("got %s", dns.RcodeToString[r.Rcode])
			}
		default:
			w := strings.Fields(want)
			slices.Sort(w)
			if got := answered(r); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, w) {
				return fmt.Errorf("got %s %v", dns.RcodeToString[r.Rcode], got)
			}
		}
		return nil
	}
}

// answered is the addresses and CNAME targets of r's answers, sorted.
func answered(r *dns.Msg) []string {
	out := addrs(r)
	for _, rr := range r.Answer {
		if c, ok := rr.(*dns.CNAME); ok {
			out = append(out, c.Target)
		}
	}
	slices.Sort(out)
	return out
}
