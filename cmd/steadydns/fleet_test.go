package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nats-io/nkeys"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// Timing of the fleet under test: a backend's death must leave the answers
// within interval × unhealthy_threshold + two push periods. The push period
// is shorter than the checks' interval, as docs/fleet.md advises: a frame
// carries each check's newest result, and with equal periods a probe that
// ends a few milliseconds late (the machine busy with other tests) shares
// a frame with the next one, so the aggregator counts one failure where
// there were two, and the death takes a whole push period longer.
const (
	fleetInterval  = 500 * time.Millisecond
	fleetThreshold = 2
	fleetPush      = 400 * time.Millisecond
	fleetBound     = fleetInterval*fleetThreshold + 2*fleetPush
	fleetStale     = 3 * time.Second // aggregation.stale_after
)

// The names the tests ask for.
const (
	www       = "www.example.test."
	staleName = "stale.example.test."
	regional  = "regional.example.test."
	shifted   = "shifted.example.test."
)

// fleetGeo is every host's server.geo: the answer regions of
// shifted.example.test, which no client of the tests is in.
const fleetGeo = `  geo:
    regions:
      west: { prefixes: ["198.18.96.0/24"] }
      east: { prefixes: ["198.18.97.0/24"] }
`

// fleetSections are the sections every host of the fleet shares, pushed to
// the config bucket. web1 and web2 probe the two backends over HTTP; gone
// probes a port where nothing listens, so stale.example.test answers
// 198.18.67.3 only when its stale policy answers every candidate.
const fleetSections = `zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: http, target: 198.18.67.1, port: 80, path: /healthz, interval: 500ms, timeout: 300ms, unhealthy_threshold: 2, healthy_threshold: 2 }
  web2: { type: http, target: 198.18.67.2, port: 80, path: /healthz, interval: 500ms, timeout: 300ms, unhealthy_threshold: 2, healthy_threshold: 2 }
  gone: { type: tcp, target: 198.18.67.2, port: 81, interval: 500ms, timeout: 300ms, unhealthy_threshold: 2, healthy_threshold: 2 }
  west: { type: http, target: 198.18.67.2, port: 80, path: /healthz, interval: 500ms, timeout: 300ms, unhealthy_threshold: 2, healthy_threshold: 2, regions: [r1, r2, r9] }
records:
  - name: regional.example.test.
    type: A
    ttl: 30
    answers:
      - { value: 198.18.67.1, check: web1 }
      - { value: 198.18.67.2, check: west }
  - name: www.example.test.
    type: A
    ttl: 30
    answers:
      - { value: 198.18.67.1, check: web1 }
      - { value: 198.18.67.2, check: web2 }
  - name: stale.example.test.
    type: A
    ttl: 30
    stale_policy: answer_all
    answers:
      - { value: 198.18.67.1, check: web1 }
      - { value: 198.18.67.3, check: gone }
  - name: shifted.example.test.
    type: A
    ttl: 30
    answers:
      - { value: 198.18.67.1, check: web1, region: west }
      - { value: 198.18.67.2, check: web2, region: east }
aggregation:
  push_interval: 400ms
  stale_after: 3s
  table_size: 1024
`

const fleetZone = `$ORIGIN example.test.
$TTL 300
@ SOA ns hostmaster 1 3600 600 86400 60
@ NS ns
ns A 198.18.65.1
`

// fleetRig is a running fleet: every role a process of its own in a host
// of its own.
type fleetRig struct {
	t       *testing.T
	f       *testenv.Fleet
	bin     string
	dir     string
	cluster string            // the cluster section of every host's file
	seeds   map[string]string // host id → its seed file
	token   string            // the API token file every host's API requires for writes
	procs   map[string]*exec.Cmd
}

// TestFleet runs two aggregators (each embedding a NATS server, the two
// joined by routes), two edges and three regions of two probers, each its
// own process in its own network namespace, and checks what a user of a
// fleet depends on.
func TestFleet(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	t.Parallel()
	r := newFleetRig(t, testenv.FleetOptions{Regions: 3, ProbersPerRegion: 2, Edges: 2, Aggregators: 2, Backends: 2}, fleetSections)
	geo := "server:\n  listen: [\"198.18.64.1:53\"]\n" + fleetGeo + "      eu: { prefixes: [\"198.18.64.0/24\"] }\n"
	r.write("bad.yaml", geo+r.cluster+strings.Replace(fleetSections, "check: web2 }", "check: web2, region: eu }", 1))
	for i := range r.f.Backends {
		r.startBackend(i)
	}
	r.startFleet()
	both := []string{"198.18.67.1", "198.18.67.2"}
	r.waitAnswers(www, both, 20*time.Second)
	r.waitAnswers(staleName, []string{"198.18.67.1"}, 20*time.Second)

	t.Run("one region loses a backend", func(t *testing.T) {
		// Four checkers of six still see b1: far above the 18% quorum.
		if err := r.f.PartitionRegion("r1", r.f.Backends[0]); err != nil {
			t.Fatal(err)
		}
		defer r.f.HealRegion("r1", r.f.Backends[0])
		deadline := time.Now().Add(4 * fleetBound)
		for time.Now().Before(deadline) {
			r.expectAnswers(t, www, both)
			time.Sleep(100 * time.Millisecond)
		}
		v := r.votes("a1", "web1")
		if len(v) != 6 {
			t.Fatalf("a1 shows %d votes on web1, want 6: %+v", len(v), v)
		}
		for _, vt := range v {
			wantUp := vt.Region != "r1"
			if vt.Healthy != wantUp || !vt.Counted {
				t.Errorf("vote %+v: want healthy=%v from region %s, counted", vt, wantUp, vt.Region)
			}
		}
	})

	t.Run("a check counts only its regions", func(t *testing.T) {
		// west is web2 checked from r1, r2 and r9, which has no prober.
		// Cut r1 and r2 from b2: web2 keeps r3's two healthy votes of
		// six, above the quorum, while west has none of its four.
		for _, region := range []string{"r1", "r2"} {
			if err := r.f.PartitionRegion(region, r.f.Backends[1]); err != nil {
				t.Fatal(err)
			}
			defer r.f.HealRegion(region, r.f.Backends[1])
		}
		r.waitAnswers(regional, []string{"198.18.67.1"}, 4*fleetBound)
		r.expectAnswers(t, www, both)
		v := r.votes("a1", "west")
		if len(v) != 4 {
			t.Fatalf("a1 shows %d votes on west, want 4, from r1 and r2: %+v", len(v), v)
		}
		for _, vt := range v {
			if vt.Healthy || !vt.Counted || (vt.Region != "r1" && vt.Region != "r2") {
				t.Errorf("vote %+v: want unhealthy, counted, from r1 or r2", vt)
			}
		}
	})

	t.Run("every region loses a backend", func(t *testing.T) {
		// Twenty deaths, from the moment the backend stops to the moment
		// both edges' XDP stop answering it.
		var took []time.Duration
		for range 20 {
			r.stopBackend(0)
			took = append(took, r.waitAnswers(www, []string{"198.18.67.2"}, 4*fleetBound))
			r.startBackend(0)
			r.waitAnswers(www, both, 4*fleetBound)
		}
		slices.Sort(took)
		p50, p99 := took[len(took)/2], took[len(took)-1]
		t.Logf("death to both edges' answers: p50 %v, p99 %v over %d trials (bound %v)", p50, p99, len(took), fleetBound)
		if p99 > fleetBound {
			t.Errorf("p99 %v exceeds interval × threshold + two push periods = %v", p99, fleetBound)
		}
	})

	t.Run("edges and operators see the aggregators' events", r.testEvents)

	t.Run("hostile hosts change nothing", func(t *testing.T) {
		// Each a process of its own holding a real key: p1a's key under
		// invented ids and p1b's, under its own id with payloads naming them, and
		// in a cell not its own; e1's key sending state and acting as an
		// aggregator; and a NATS server with no key routing to the
		// aggregators. Were any of it counted, the invented checkers
		// would outvote the six real ones and drain both backends.
		sum := func(name string) float64 {
			return r.metric(r.host("a1"), name) + r.metric(r.host("a2"), name)
		}
		refused := func(what string) float64 { return sum(`steadydns_nats_refused_total{what="` + what + `"}`) }
		before := map[string]float64{"publish": refused("publish"), "subscribe": refused("subscribe"), "route": refused("route"),
			"rejected": sum("steadydns_frames_rejected_total")}
		var urls, routes []string
		for _, a := range r.f.Aggregators {
			urls = append(urls, "nats://"+a.V4.String()+":4222")
			routes = append(routes, a.V4.String()+":6222")
		}
		var hash uint64
		if _, err := fmt.Sscanf(r.fleetView(r.host("a1"), "a1").ConfigHash, "%x", &hash); err != nil {
			t.Fatal(err)
		}
		common := []string{"--urls", strings.Join(urls, ","), "--hash", strconv.FormatUint(hash, 10), "--entries", "1024",
			"--table", "1024", "--push", fleetPush.String(), "--for", (8 * fleetPush).String()}
		p1a, e1 := r.host("p1a"), r.host("e1")
		for _, h := range []struct {
			mode string
			host *testenv.Host
			args []string
		}{
			{"invent", p1a, []string{"--id", "p1a", "--seed", r.seeds["p1a"]}},
			{"forge", p1a, []string{"--id", "p1a", "--seed", r.seeds["p1a"]}},
			{"cell", p1a, []string{"--id", "p1a", "--seed", r.seeds["p1a"]}},
			{"state", e1, []string{"--id", "e1", "--seed", r.seeds["e1"]}},
			{"table", e1, []string{"--id", "e1", "--seed", r.seeds["e1"]}},
			{"route", r.f.Client, []string{"--routes", strings.Join(routes, ",")}},
		} {
			r.spawnHostile(h.mode, h.host, append(slices.Clone(common), h.args...)...)
		}
		deadline := time.Now().Add(10 * fleetPush)
		for time.Now().Before(deadline) {
			r.expectAnswers(t, www, both)
			time.Sleep(100 * time.Millisecond)
		}
		for _, agg := range []string{"a1", "a2"} {
			v := r.votes(agg, "web1")
			if len(v) != 6 {
				t.Errorf("%s counts %d votes on web1, want the six real probers': %+v", agg, len(v), v)
			}
			for _, vt := range v {
				if !vt.Healthy {
					t.Errorf("%s: vote %+v, want healthy", agg, vt)
				}
			}
		}
		// Every attempt is counted: the servers refused 30 invented ids,
		// p1b's id under p1a's key, the foreign cell, the edge's state and table (publishes), the
		// edge's frame subscription, and the keyless route; the
		// aggregators dropped the forged frames.
		after := map[string]float64{"publish": refused("publish"), "subscribe": refused("subscribe"), "route": refused("route"),
			"rejected": sum("steadydns_frames_rejected_total")}
		t.Logf("refused while hostile: publish %v, subscribe %v, route %v; frames rejected %v", after["publish"]-before["publish"],
			after["subscribe"]-before["subscribe"], after["route"]-before["route"], after["rejected"]-before["rejected"])
		for what, least := range map[string]float64{"publish": invented + 4, "subscribe": 1, "route": 1, "rejected": invented} {
			if got := after[what] - before[what]; got < least {
				t.Errorf("%s refusals counted: %v, want at least %v", what, got, least)
			}
		}
		for _, e := range []string{"e1", "e2"} {
			if f := r.fleetView(r.host(e), e).Following; f != "a1" && f != "a2" {
				t.Errorf("%s follows %q", e, f)
			}
		}
		// The binary itself refuses to run a host under another's key.
		code, _, stderr := run(r.bin, "serve", "--config", filepath.Join(r.dir, "p1b.yaml"), "--id", "p1b", "--nkey-seed", r.seeds["p1a"])
		if code == 0 || !strings.Contains(stderr, "not host p1b's") {
			t.Errorf("serve as p1b with p1a's seed: exit %d, %s", code, stderr)
		}
	})

	t.Run("state changes come from aggregators and the operator's key", func(t *testing.T) {
		// An edge's API refuses the write and says where to send it.
		e1 := r.host("e1")
		req, err := http.NewRequest(http.MethodPut, "http://"+net.JoinHostPort(e1.V4.String(), "9153")+"/api/v1/checks/web2/admin", strings.NewReader("down"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := os.ReadFile(r.token)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := e1.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "a1, a2") {
			t.Fatalf("PUT admin on an edge: %d %s, want 403 naming a1, a2", resp.StatusCode, body)
		}
		r.expectAnswers(t, www, both)
		// The operator's admin key reaches every aggregator, and back.
		state := func(value string) {
			t.Helper()
			cmd := r.f.Client.Command(r.bin, "state", "--config", filepath.Join(r.dir, "fleet.yaml"), "--nkey-seed", r.seeds["admin"], "admin", "web2", value)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("steadydns state admin web2 %s: %v\n%s", value, err, out)
			}
		}
		state("down")
		r.waitAnswers(www, []string{"198.18.67.1"}, 4*fleetPush)
		state("auto")
		r.waitAnswers(www, both, 4*fleetPush)
		// An edge's key does not get as far as the servers with it.
		cmd := r.f.Client.Command(r.bin, "state", "--config", filepath.Join(r.dir, "fleet.yaml"), "--nkey-seed", r.seeds["e1"], "admin", "web2", "down")
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "host e1 is not an admin") {
			t.Fatalf("state with an edge's key: %v\n%s", err, out)
		}
	})

	t.Run("a shift reaches every edge within two push periods", func(t *testing.T) {
		r.waitAnswers(shifted, both, 4*fleetPush)
		tok, err := os.ReadFile(r.token)
		if err != nil {
			t.Fatal(err)
		}
		call := func(h *testenv.Host, method, path, body string) (int, string) {
			t.Helper()
			req, err := http.NewRequest(method, "http://"+net.JoinHostPort(h.V4.String(), "9153")+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
			resp, err := h.HTTPClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		// Two tables after the change is sent, every edge answers by it:
		// counted in the tables' versions, the push slots, not in time.
		withinTwoPushes := func(what string, want []string) {
			t.Helper()
			for _, e := range r.f.Edges {
				v := r.checks(e, e.Role).Table.Version
				r.waitFor(e.Role+" two tables on", 20*fleetPush, func() bool { return r.checks(e, e.Role).Table.Version >= v+2 })
				if got, err := r.answers(e, shifted); err != nil || !slices.Equal(got, want) {
					t.Errorf("%s: %s answers %v (%v) two tables on, want %v", what, e.Role, got, err, want)
				}
			}
		}
		if code, body := call(r.host("e1"), http.MethodPut, "/api/v1/shifts/west", `{"duration": "10m", "reason": "x"}`); code != http.StatusForbidden || !strings.Contains(body, "a1, a2") {
			t.Errorf("PUT a shift on an edge: %d %s, want 403 naming a1, a2", code, body)
		}
		cmd := r.f.Client.Command(r.bin, "state", "--config", filepath.Join(r.dir, "fleet.yaml"), "--nkey-seed", r.seeds["admin"], "shift", "west", "--duration", "10m", "--reason", "fleet drill")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("steadydns state shift west: %v\n%s", err, out)
		}
		withinTwoPushes("west shifted by the admin key", []string{"198.18.67.2"})
		// Every aggregator has it, from the admin; www has no region.
		for _, a := range []string{"a1", "a2"} {
			var list struct{ Shifts []api.ShiftView }
			if code, body := call(r.host(a), http.MethodGet, "/api/v1/shifts", ""); code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil ||
				len(list.Shifts) != 1 || list.Shifts[0].Region != "west" || list.Shifts[0].Who != "admin" || list.Shifts[0].Reason != "fleet drill" {
				t.Errorf("shifts on %s: %d %s", a, code, body)
			}
		}
		r.expectAnswers(t, www, both)
		// The edges log it from the aggregator they follow.
		for _, e := range r.f.Edges {
			r.waitFor(e.Role+" logging west's shift", 20*fleetPush, func() bool {
				_, body := call(e, http.MethodGet, "/api/v1/events", "")
				return strings.Contains(body, `"region": "west"`) && strings.Contains(body, `"to": "shifted"`)
			})
		}
		// An aggregator's API cancels it everywhere.
		if code, body := call(r.host("a1"), http.MethodDelete, "/api/v1/shifts/west", ""); code != http.StatusNoContent {
			t.Fatalf("DELETE the shift on a1: %d %s", code, body)
		}
		withinTwoPushes("west unshifted through a1's API", both)
	})

	t.Run("a key removed from the aggregators' files is revoked on reload", func(t *testing.T) {
		// p3b's line leaves both aggregators' files; a SIGHUP makes their
		// servers drop it and refuse its reconnects, and the aggregators
		// count five checkers. The line back and another SIGHUP, six.
		orig := map[string][]byte{}
		for _, a := range []string{"a1", "a2"} {
			path := filepath.Join(r.dir, a+".yaml")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			orig[a] = b
			var kept []string
			for _, l := range strings.SplitAfter(string(b), "\n") {
				if !strings.HasPrefix(l, "      p3b: ") {
					kept = append(kept, l)
				}
			}
			r.write(a+".yaml", strings.Join(kept, ""))
			r.procs[a].Process.Signal(syscall.SIGHUP)
		}
		before := r.metric(r.host("a1"), `steadydns_nats_refused_total{what="client"}`) + r.metric(r.host("a2"), `steadydns_nats_refused_total{what="client"}`)
		counted := func(agg string) int {
			n := 0
			for _, v := range r.votes(agg, "web1") {
				if v.Counted {
					n++
				}
			}
			return n
		}
		r.waitFor("p3b out of both aggregators' quorum", 4*time.Second+4*fleetPush, func() bool { return counted("a1") == 5 && counted("a2") == 5 })
		r.waitFor("p3b's reconnects refused", 5*time.Second, func() bool {
			return r.metric(r.host("a1"), `steadydns_nats_refused_total{what="client"}`)+r.metric(r.host("a2"), `steadydns_nats_refused_total{what="client"}`) > before
		})
		r.expectAnswers(t, www, both)
		for _, a := range []string{"a1", "a2"} {
			r.write(a+".yaml", string(orig[a]))
			r.procs[a].Process.Signal(syscall.SIGHUP)
		}
		r.waitFor("p3b back in both aggregators' quorum", 10*time.Second, func() bool { return counted("a1") == 6 && counted("a2") == 6 })
	})

	t.Run("a bad revision is refused everywhere", func(t *testing.T) {
		// Valid where it was pushed, whose server section defines the
		// region eu, and invalid on every host, whose own has none.
		r.push("bad.yaml")
		time.Sleep(4 * fleetPush)
		for _, h := range []string{"e1", "e2", "a1", "a2"} {
			if v := r.fleetView(r.host(h), h); v.Refused == 0 || v.Revision != 1 {
				t.Errorf("%s: revision %d, refused %d; want revision 1 kept and the new one refused", h, v.Revision, v.Refused)
			}
		}
		r.expectAnswers(t, www, both)
	})

	t.Run("an aggregator dies", func(t *testing.T) {
		r.kill("a1")
		// An edge switches after three silent push periods; then a2's
		// tables keep its table young. A busy machine may delay a push,
		// so the age is watched for a while rather than read once.
		for _, e := range []string{"e1", "e2"} {
			h := r.host(e)
			r.waitFor(e+" following a2", 10*fleetPush, func() bool { return r.fleetView(h, e).Following == "a2" })
			r.waitFor(e+"'s table fresh from a2", 10*fleetPush, func() bool { return r.tableAge(h) <= 2*fleetPush.Seconds() })
		}
		r.stopBackend(1)
		r.waitAnswers(www, []string{"198.18.67.1"}, 4*fleetBound)
		r.startBackend(1)
		r.waitAnswers(www, both, 4*fleetBound)
	})

	t.Run("both aggregators die and return", func(t *testing.T) {
		// a1 died above. With a2 gone too no table arrives: each edge
		// keeps its last one, whose age climbs, until stale_after; then
		// stale.example.test, whose policy is answer_all, answers every
		// candidate, 198.18.67.3 of the down check gone included, while
		// www.example.test keeps the last table's answers.
		r.expectAnswers(t, staleName, []string{"198.18.67.1"})
		r.kill("a2")
		killed := time.Now()
		time.Sleep(fleetStale / 2)
		young := map[string]float64{}
		for _, e := range r.f.Edges {
			c := r.checks(e, e.Role)
			young[e.Role] = r.metric(e, "steadydns_health_table_age_seconds")
			if c.Table.Stale {
				t.Errorf("%s says its table is stale %v after the last aggregator died, before stale_after %v", e.Role, time.Since(killed), fleetStale)
			}
		}
		r.expectAnswers(t, staleName, []string{"198.18.67.1"})
		all := []string{"198.18.67.1", "198.18.67.3"}
		took := r.waitAnswers(staleName, all, fleetStale+4*fleetPush) + fleetStale/2
		t.Logf("the stale policy applied %v after the last aggregator died (stale_after %v)", took, fleetStale)
		if took < fleetStale-2*fleetPush {
			t.Errorf("answered every candidate %v after the last aggregator died, before stale_after %v", took, fleetStale)
		}
		for _, e := range r.f.Edges {
			c := r.checks(e, e.Role)
			old := r.metric(e, "steadydns_health_table_age_seconds")
			if !c.Table.Stale || old <= fleetStale.Seconds() || old <= young[e.Role] {
				t.Errorf("%s: stale %v, table age %.1fs after %.1fs; want stale, older than %v and climbing", e.Role, c.Table.Stale, old, young[e.Role], fleetStale)
			}
		}
		r.expectAnswers(t, www, both)

		// Both come back: their servers form the cluster again, every
		// host reconnects, and the edges answer from fresh tables.
		for _, a := range r.f.Aggregators {
			r.start(a, "aggregator", "")
		}
		back := time.Now()
		r.waitAnswers(staleName, []string{"198.18.67.1"}, 30*time.Second)
		for _, e := range r.f.Edges {
			r.waitFor(e.Role+" fresh again", 4*fleetPush, func() bool {
				c := r.checks(e, e.Role)
				return !c.Table.Stale && c.Fleet.Following != "" && c.Table.AgeSec <= 2*fleetPush.Seconds()
			})
		}
		t.Logf("the edges answered from fresh tables %v after both aggregators restarted", time.Since(back))
		// An aggregator killed within a second of a transition may have
		// saved the state before it (the state file is written at most
		// once a second): its checkers then confirm the newer state
		// within the thresholds.
		r.waitAnswers(www, both, fleetBound)
		// The bad revision pushed above is still the bucket's newest: a
		// host that starts refuses it and takes the last good one.
		for _, a := range r.f.Aggregators {
			if v := r.fleetView(a, a.Role); v.Revision != 1 || v.Refused == 0 {
				t.Errorf("%s restarted on revision %d, refused %d; want revision 1 and the bad one refused", a.Role, v.Revision, v.Refused)
			}
		}
	})
}

// newFleetRig builds a fleet of opts's shape and writes every host's file,
// with the cluster section the hosts share, and fleet.yaml, which config
// push stores: the fleet sections, after the pushing host's own. Nothing
// runs yet.
func newFleetRig(t *testing.T, opts testenv.FleetOptions, sections string) *fleetRig {
	bin := build(t)
	f := testenv.StartFleet(t, opts)
	r := &fleetRig{t: t, f: f, bin: bin, dir: t.TempDir(), seeds: map[string]string{}, procs: map[string]*exec.Cmd{}}
	t.Cleanup(func() {
		for name, p := range r.procs {
			p.Process.Kill()
			p.Wait()
			delete(r.procs, name)
		}
		// The edges' XDP links and maps are pinned: remove them.
		for _, e := range f.Edges {
			os.RemoveAll(r.bpffs(e.Role))
		}
	})
	// Every host its own key, listed with its roles (and a prober's
	// region) in cluster.nats.hosts; admin is config push's.
	hosts := "    hosts:\n"
	addHost := func(id, role, region string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		r.seeds[id] = r.write(id+".seed", string(seed))
		hosts += fmt.Sprintf("      %s: { roles: [%s], key: %s", id, role, pub)
		if region != "" {
			hosts += ", region: " + region
		}
		hosts += " }\n"
	}
	for _, a := range f.Aggregators {
		addHost(a.Role, "aggregator", "")
	}
	for _, e := range f.Edges {
		addHost(e.Role, "edge", "")
	}
	for i, ps := range f.Probers {
		for _, p := range ps {
			addHost(p.Role, "prober", f.Regions[i])
		}
	}
	addHost("admin", "admin", "")
	var urls, routes []string
	for _, a := range f.Aggregators {
		urls = append(urls, fmt.Sprintf("%q", "nats://"+a.V4.String()+":4222"))
		routes = append(routes, fmt.Sprintf("%q", "nats-route://"+a.V4.String()+":6222"))
	}
	head := fmt.Sprintf("cluster:\n  config: nats\n  nats:\n    urls: [%s]\n", strings.Join(urls, ", "))
	embed := fmt.Sprintf(`    embed:
      listen: 0.0.0.0:4222
      cluster_listen: 0.0.0.0:6222
      routes: [%s]
      store_dir: %s
      insecure: true
`, strings.Join(routes, ", "), filepath.Join(r.dir, "nats"))
	r.cluster = head + embed + hosts
	r.token = r.write("api.token", "fleet-test-token\n")
	r.write("example.test.zone", fleetZone)
	r.write("fleet.yaml", "server:\n  listen: [\"198.18.64.1:53\"]\n"+fleetGeo+r.cluster+sections)
	for _, h := range f.Hosts() {
		// Each API listens on its host's address, for the test to read
		// from the client: beyond loopback, so behind a token.
		server := fmt.Sprintf("server:\n  listen: [\"%s:53\"]\n  api: %s:9153\n  api_token_file: %s\n  state_dir: %s\n", h.V4, h.V4, r.token, filepath.Join(r.dir, "state-"+h.Role)) + fleetGeo
		if h.Role[0] == 'e' {
			server += fmt.Sprintf("  interfaces: [%s]\n  xdp_mode: generic\n  bpffs: %s\n", h.Link, r.bpffs(h.Role))
		}
		r.write(h.Role+".yaml", server+r.cluster)
	}
	return r
}

// startFleet starts the aggregators, pushes fleet.yaml as the first
// revision, starts the edges and the probers, and waits until every edge
// follows an aggregator: a cold edge answers every candidate.
func (r *fleetRig) startFleet() {
	r.t.Helper()
	for _, a := range r.f.Aggregators {
		r.start(a, "aggregator", "")
	}
	r.push("fleet.yaml")
	for _, e := range r.f.Edges {
		r.start(e, "edge", "")
	}
	for i, region := range r.f.Regions {
		for _, p := range r.f.Probers[i] {
			r.start(p, "prober", region)
		}
	}
	for _, e := range r.f.Edges {
		r.waitFor(e.Role+" following an aggregator", 30*time.Second, func() bool { return r.fleetView(e, e.Role).Following != "" })
	}
}

func (r *fleetRig) bpffs(role string) string {
	return "/sys/fs/bpf/" + r.f.Prefix() + "-" + role
}

func (r *fleetRig) write(name, data string) string {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *fleetRig) host(role string) *testenv.Host {
	r.t.Helper()
	hs, err := r.f.Lookup(role)
	if err != nil {
		r.t.Fatal(err)
	}
	return hs[0]
}

// start runs a role on h under its own id and seed.
func (r *fleetRig) start(h *testenv.Host, role, region string) {
	r.startAs(h, h.Role, role, r.seeds[h.Role], region)
}

func (r *fleetRig) startAs(h *testenv.Host, id, role, seed, region string) {
	r.t.Helper()
	cfg := filepath.Join(r.dir, id+".yaml")
	// An aggregator writes its state file at start: without a state_dir
	// of the test's own, it would overwrite this machine's
	// /var/lib/steadydns/state.json, a deployed server's.
	b, err := os.ReadFile(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	if role == "aggregator" && !strings.Contains(string(b), "\n  state_dir: ") {
		r.t.Fatalf("%s: an aggregator's config needs a state_dir of the test's own", cfg)
	}
	args := []string{"serve", "--config", cfg, "--role", role, "--id", id, "--nkey-seed", seed}
	if region != "" {
		args = append(args, "--region", region)
	}
	r.spawn(id, h, r.bin, args...)
}

func (r *fleetRig) spawn(name string, h *testenv.Host, bin string, args ...string) {
	r.t.Helper()
	cmd := h.Command(bin, args...)
	// A process started again under the same name adds to its log.
	log, err := os.OpenFile(filepath.Join(r.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// A host writes each config revision under the temporary directory,
	// by its id: fleets of other tests, with the same ids, run at the
	// same time on this machine.
	cmd.Env = append(os.Environ(), "TMPDIR="+r.dir)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting %s: %v", name, err)
	}
	r.procs[name] = cmd
	r.t.Cleanup(func() {
		if r.t.Failed() {
			b, _ := os.ReadFile(log.Name())
			r.t.Logf("%s's log:\n%s", name, tail(string(b), 40))
		}
		log.Close()
	})
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// spawnHostile runs the test binary as a hostile host (hostile) on h.
func (r *fleetRig) spawnHostile(mode string, h *testenv.Host, args ...string) {
	r.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := h.Command(exe, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), hostileEnv+"="+mode)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting hostile %s: %v", mode, err)
	}
	r.t.Cleanup(func() {
		if err := cmd.Wait(); err != nil {
			r.t.Errorf("hostile %s: %v\n%s", mode, err, out.String())
		}
	})
}

func (r *fleetRig) kill(name string) {
	r.t.Helper()
	p, ok := r.procs[name]
	if !ok {
		r.t.Fatalf("no process %s", name)
	}
	p.Process.Signal(syscall.SIGKILL)
	p.Wait()
	delete(r.procs, name)
}

// startBackend serves backend i's health endpoint on port 80; extra
// arguments go to `testenv backend`.
func (r *fleetRig) startBackend(i int, extra ...string) {
	b := r.f.Backends[i]
	r.spawn(b.Role, b, r.bin, append([]string{"testenv", "backend", "--listen", b.V4.String() + ":80"}, extra...)...)
}

func (r *fleetRig) stopBackend(i int) { r.kill(r.f.Backends[i].Role) }

// push stores a config file's fleet sections in the bucket, from the
// client host.
func (r *fleetRig) push(name string) {
	r.t.Helper()
	var out []byte
	var err error
	// The aggregators' servers may still be forming their cluster.
	for try := 0; try < 30; try++ {
		cmd := r.f.Client.Command(r.bin, "config", "push", "--config", filepath.Join(r.dir, name), "--nkey-seed", r.seeds["admin"])
		if out, err = cmd.CombinedOutput(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	r.t.Fatalf("config push %s: %v\n%s", name, err, out)
}

// answers asks one edge's XDP for name's A records from the client.
func (r *fleetRig) answers(edge *testenv.Host, name string) ([]string, error) {
	var got []string
	err := r.f.Client.Do(func() error {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		c := &dns.Client{Timeout: 500 * time.Millisecond}
		in, _, err := c.Exchange(m, net.JoinHostPort(edge.V4.String(), "53"))
		if err != nil {
			return err
		}
		for _, rr := range in.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = append(got, a.A.String())
			}
		}
		return nil
	})
	sort.Strings(got)
	return got, err
}

// waitAnswers waits until every edge answers name with exactly want, and
// returns how long that took.
func (r *fleetRig) waitAnswers(name string, want []string, limit time.Duration) time.Duration {
	r.t.Helper()
	start := time.Now()
	for {
		ok := true
		var last []string
		for _, e := range r.f.Edges {
			got, err := r.answers(e, name)
			if err != nil || !slices.Equal(got, want) {
				ok, last = false, got
				break
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			r.t.Fatalf("edges did not answer %s with %v within %v; last %v", name, want, limit, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *fleetRig) waitFor(what string, limit time.Duration, ok func() bool) {
	r.t.Helper()
	for start := time.Now(); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > limit {
			r.t.Fatalf("%s: not within %v", what, limit)
		}
	}
}

func (r *fleetRig) expectAnswers(t *testing.T, name string, want []string) {
	t.Helper()
	for _, e := range r.f.Edges {
		if got, err := r.answers(e, name); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s answers %s with %v (%v), want %v", e.Role, name, got, err, want)
		}
	}
}

type apiFleet struct {
	ConfigHash       string `json:"config_hash"`
	Following        string `json:"following"`
	Revision         uint64 `json:"config_revision"`
	Refused          uint64 `json:"config_revisions_refused"`
	PermissionErrors uint64 `json:"permission_errors"`
}

type apiChecks struct {
	Table struct {
		Version uint64  `json:"version"`
		AgeSec  float64 `json:"age_seconds"`
		Stale   bool    `json:"stale"`
	} `json:"table"`
	Fleet  apiFleet `json:"fleet"`
	Checks []struct {
		ID    string `json:"id"`
		Votes []struct {
			Checker string `json:"checker"`
			Region  string `json:"region"`
			Healthy bool   `json:"healthy"`
			Counted bool   `json:"counted"`
		} `json:"votes"`
	} `json:"checks"`
}

// checks reads /api/v1/checks of the host running id, from that host.
func (r *fleetRig) checks(h *testenv.Host, id string) apiChecks {
	r.t.Helper()
	port := "9153"
	var out apiChecks
	var resp *http.Response
	var err error
	for try := 0; ; try++ {
		// A host still starting has no api yet.
		if resp, err = h.HTTPClient().Get("http://" + net.JoinHostPort(h.V4.String(), port) + "/api/v1/checks"); err == nil || try == 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("api of %s: %v", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("api of %s: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		r.t.Fatalf("api of %s: %v", id, err)
	}
	return out
}

func (r *fleetRig) fleetView(h *testenv.Host, id string) apiFleet {
	return r.checks(h, id).Fleet
}

func (r *fleetRig) tableAge(h *testenv.Host) float64 { return r.checks(h, h.Role).Table.AgeSec }

type vote struct {
	Checker, Region  string
	Healthy, Counted bool
}

// votes are the checkers' votes on check as aggregator agg shows them.
func (r *fleetRig) votes(agg, check string) []vote {
	r.t.Helper()
	var out []vote
	for _, c := range r.checks(r.host(agg), agg).Checks {
		if c.ID == check {
			for _, v := range c.Votes {
				out = append(out, vote(v))
			}
		}
	}
	return out
}

// metric reads an unlabelled metric from /metrics of the host's api.
func (r *fleetRig) metric(h *testenv.Host, name string) float64 {
	r.t.Helper()
	resp, err := h.HTTPClient().Get("http://" + net.JoinHostPort(h.V4.String(), "9153") + "/metrics")
	if err != nil {
		r.t.Fatalf("metrics of %s: %v", h.Role, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatalf("metrics of %s: %v", h.Role, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				r.t.Fatalf("metrics of %s: %s: %v", h.Role, line, err)
			}
			return f
		}
	}
	r.t.Fatalf("metrics of %s: no %s", h.Role, name)
	return 0
}
