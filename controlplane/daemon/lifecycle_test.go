package daemon_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/daemon"
)

// wwwA is what startEdge's edge answers to www.example.test. A.
var wwwA = []string{"198.18.1.1", "198.18.1.2"}

// TestRestartKeepsAnswering stops the daemon and starts another on the same
// pins while a client queries without pause: XDP, pinned with its maps,
// answers every query throughout.
func TestRestartKeepsAnswering(t *testing.T) {
	e := startEdge(t, "native")
	d2, x0 := restartUnderLoad(t, e, wwwA, 100*time.Millisecond, 50, func() {})
	defer d2.Close()
	counts, err := d2.XDPOutcomes()
	if err != nil {
		t.Fatal(err)
	}
	// The same layout: the counters are the pinned ones, and they grew
	// while no daemon ran.
	if counts["answered"] <= x0 {
		t.Errorf("xdp answered nothing while the daemon was down (%d then %d)", x0, counts["answered"])
	}
}

// TestRestartWithNewLayout restarts with another record capacity, which
// is another map layout (as is an upgrade that changes a map): the new
// program takes over the pinned link without a gap, the old layout's maps
// go, and detach with the new config removes everything.
func TestRestartWithNewLayout(t *testing.T) {
	e := startEdge(t, "native")
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	pins := regexp.MustCompile(`bpffs: (\S+)`).FindSubmatch(cfg)[1]
	before, _ := filepath.Glob(filepath.Join(string(pins), "v*"))
	d2, _ := restartUnderLoad(t, e, wwwA, 100*time.Millisecond, 50, func() {
		write(t, e.cfg, strings.Replace(string(cfg), "server:\n", "server:\n  max_records: 4096\n", 1))
	})
	// New maps, new counters: the new program's answers alone.
	if counts, err := d2.XDPOutcomes(); err != nil || counts["answered"] == 0 {
		t.Errorf("the new program answered nothing: %v %v", counts, err)
	}
	after, _ := filepath.Glob(filepath.Join(string(pins), "v*"))
	if len(before) != 1 || len(after) != 1 || before[0] == after[0] {
		t.Errorf("layout directories %v before, %v after: want one, another", before, after)
	}
	links, _ := filepath.Glob(filepath.Join(string(pins), "link_*"))
	if len(links) != 1 {
		t.Errorf("links pinned: %v, want one", links)
	}
	d2.Close()
	if err := e.env.Edge.Do(func() error { return daemon.Detach(e.cfg) }); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(string(pins), "*")); len(left) != 0 {
		t.Errorf("after detach: %v left", left)
	}
	e.env.Client.Do(func() error {
		if r, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(q("www.example.test.", dns.TypeA), "198.18.0.2:53"); err == nil {
			t.Errorf("answered after detach with the server down: %v", r)
		}
		return nil
	})
}

// restartUnderLoad closes e's daemon, runs between, and starts another on
// the same config file, while a client queries without pause from before
// the close until settle after the start: every query must be answered
// with want exactly (so a backend left out before the restart is never
// answered across it), and at least least queries must go. It returns the
// new daemon and the XDP answers counted before the restart.
func restartUnderLoad(t *testing.T, e *edge, want []string, settle time.Duration, least int64, between func()) (*daemon.Daemon, uint64) {
	t.Helper()
	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var mu sync.Mutex
	var wrong []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.env.Client.Do(func() error {
			c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				r, _, err := c.Exchange(q("www.example.test.", dns.TypeA), "198.18.0.2:53")
				sent.Add(1)
				if err != nil {
					failed.Add(1)
				} else if got := addrs(r); !slices.Equal(got, want) {
					mu.Lock()
					wrong = append(wrong, fmt.Sprint(got))
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}()

	time.Sleep(100 * time.Millisecond)
	x0, _ := e.paths(t)
	if err := e.d.Close(); err != nil {
		t.Fatal(err)
	}
	between()
	// Down: only the pinned XDP program answers.
	time.Sleep(200 * time.Millisecond)
	var d2 *daemon.Daemon
	if err := e.env.Edge.Do(func() (err error) {
		d2, err = daemon.StartWith(e.cfg, daemon.Options{Netns: e.env.Edge.Do})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
	close(stop)
	<-done
	if failed.Load() != 0 || len(wrong) != 0 || sent.Load() < least {
		t.Fatalf("of %d queries across the restart, %d unanswered and %d answered other than %v: %v",
			sent.Load(), failed.Load(), len(wrong), want, wrong[:min(len(wrong), 5)])
	}
	t.Logf("%d queries across the restart, each answered %v", sent.Load(), want)
	return d2, x0
}

// TestReload: a bad config is rejected with file, line and key and the
// running one keeps serving; a good one changes the answers.
func TestReload(t *testing.T) {
	e := startEdge(t, "native")
	orig, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(orig), "ttl: 30", "ttl: thirty", 1)
	write(t, e.cfg, bad)
	err = e.d.Reload()
	at := fmt.Sprintf("%s:%d: records[0].ttl:", e.cfg, strings.Count(bad[:strings.Index(bad, "ttl: thirty")], "\n")+1)
	if err == nil || !strings.Contains(err.Error(), at) {
		t.Fatalf("reload of a bad config: %v, want an error at %s", err, at)
	}
	if got := addrs(e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeA))); len(got) != 2 {
		t.Fatalf("after a rejected reload: %v", got)
	}

	good := strings.Replace(string(orig), "      - { value: 198.18.1.2, check: web2 }\n", "      - { value: 198.18.1.2, check: web2 }\n      - { value: 198.18.1.3 }\n", 1)
	write(t, e.cfg, good)
	if err := e.d.Reload(); err != nil {
		t.Fatal(err)
	}
	want := []string{"198.18.1.1", "198.18.1.2", "198.18.1.3"}
	x0, _ := e.paths(t)
	if got := addrs(e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeA))); !slices.Equal(got, want) {
		t.Fatalf("after reload: %v, want %v", got, want)
	}
	if x1, _ := e.paths(t); x1 != x0+1 {
		t.Errorf("the reloaded record was not answered by xdp")
	}
	// Removing a record removes it from the kernel too.
	noAAAA := good[:strings.Index(good, "  - name: www.example.test.\n    type: AAAA")] + good[strings.Index(good, "aggregation:"):]
	write(t, e.cfg, noAAAA)
	if err := e.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeAAAA)); len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess || len(r.Ns) != 1 {
		t.Errorf("AAAA after its removal: %v, want NODATA", r)
	}
}

// TestHTTPReloadAndReadiness: /healthz and /readyz over the API, and a
// reload through POST /api/v1/reload, which refuses a bad config with its
// error and 422 while the running config keeps answering.
func TestHTTPReloadAndReadiness(t *testing.T) {
	e := startEdge(t, "native")
	client := e.api(t)
	call := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://127.0.0.1:9153"+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := call("GET", "/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz of a started edge: %d %q", code, body)
	}
	// A write without the token is refused on loopback too.
	resp, err := e.env.Edge.HTTPClient().Post("http://127.0.0.1:9153/api/v1/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("reload without the token: %s, want 401", resp.Status)
	}

	orig, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(orig), "ttl: 30", "ttl: thirty", 1)
	write(t, e.cfg, bad)
	code, body := call("POST", "/api/v1/reload")
	at := fmt.Sprintf("%s:%d: records[0].ttl:", e.cfg, strings.Count(bad[:strings.Index(bad, "ttl: thirty")], "\n")+1)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, at) {
		t.Errorf("reload of a bad config: %d %s, want 422 naming %s", code, body, at)
	}
	if got := addrs(e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeA))); len(got) != 2 {
		t.Fatalf("after a refused reload: %v", got)
	}
	write(t, e.cfg, strings.Replace(string(orig), "      - { value: 198.18.1.2, check: web2 }\n", "      - { value: 198.18.1.2, check: web2 }\n      - { value: 198.18.1.3 }\n", 1))
	if code, body := call("POST", "/api/v1/reload"); code != http.StatusNoContent {
		t.Fatalf("reload of a good config: %d %s", code, body)
	}
	if got := addrs(e.ask(t, "udp", "198.18.0.2:53", q("www.example.test.", dns.TypeA))); len(got) != 3 {
		t.Errorf("after the reload: %v, want 3 addresses", got)
	}
	if code, _ := call("GET", "/api/v1/reload"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /api/v1/reload: %d, want 405", code)
	}

	// Without its link XDP is gone from the interface: not ready, and why.
	cfg, _ := os.ReadFile(e.cfg)
	pins := regexp.MustCompile(`bpffs: (\S+)`).FindSubmatch(cfg)[1]
	links, _ := filepath.Glob(filepath.Join(string(pins), "link_*"))
	if len(links) != 1 {
		t.Fatalf("link pins %v, want one", links)
	}
	os.Remove(links[0])
	code, body = call("GET", "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "xdp is not attached to "+e.env.Edge.Link) {
		t.Errorf("/readyz without xdp: %d %q, want 503 saying xdp is not attached", code, body)
	}
}
