package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

const pageConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53"]
  api: 127.0.0.1:9153
  api_read_token_file: %s
  bpffs: %s
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: http, target: 198.18.1.1, port: 80, path: /healthz, expect_body: ok, interval: 200ms, timeout: 150ms, unhealthy_threshold: 2 }
  web2: { type: http, target: 198.18.1.2, port: 80, path: /healthz, expect_body: ok, interval: 200ms, timeout: 150ms, unhealthy_threshold: 2 }
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2, check: web2}]
aggregation:
  push_interval: 500ms
`

// readToken is the page test's read token.
const readToken = "page-read-token"

// TestStatusPage: the status page, loaded in headless Chromium with the
// read token in its fragment, shows a dead backend's record answer out,
// its check down with the checker's vote, its event, and refreshes every
// push period. Its screenshot is kept in $STEADYDNS_SCREENSHOT_DIR, or
// the test's temporary directory.
func TestStatusPage(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (scripts/deps.sh installs it): %v", err)
	}
	env := testenv.Start(t, testenv.Options{Backends: 2})
	backends := []*httpBackend{{host: env.Backends[0]}, {host: env.Backends[1]}}
	for _, b := range backends {
		b.start(t)
		t.Cleanup(b.stop)
	}
	tokenFile := filepath.Join(t.TempDir(), "read.token")
	if err := os.WriteFile(tokenFile, []byte(readToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve(t, env, func(link, pins string) string { return fmt.Sprintf(pageConfig, link, tokenFile, pins) })

	backends[0].stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var e struct{ Events []api.EventView }
		readAPI(t, env, "/api/v1/events?check=web1&transition=down", &e)
		if len(e.Events) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("web1 did not go down within 30s of its backend stopping")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var c struct{ Fleet api.FleetView }
	readAPI(t, env, "/api/v1/checks", &c)

	url := "http://127.0.0.1:9153/#token=" + readToken
	dom := browse(t, env, chromium, "--dump-dom", url)
	for what, re := range map[string]string{
		"the record":              `data-record="www.example.test. A"`,
		"the dead answer out":     `data-answer="198.18.1.1" data-in="false"`,
		"the live answer in":      `data-answer="198.18.1.2" data-in="true"`,
		"the check down":          `data-check="web1" data-state="down"`,
		"its reason":              `data-check="web1" data-state="down">.*?class="reason">refused<`,
		"the checker's vote down": `data-check="web1".*?class="vote down" data-checker="` + regexp.QuoteMeta(c.Fleet.ID) + `"`,
		"the event":               `data-event-check="web1" data-to="unhealthy"`,
		"the refresh period":      `data-refresh-ms="500"`,
		// Successes before the backend stopped may fill bars of their
		// own before the first failing one.
		"a latency chart": `data-check="web1".*?<svg class="chart"[^>]*><title>mean latency[^<]*[1-9][0-9]* failures</title>(?:<rect class="ok"[^>]*></rect>)*<rect class="fail"`,
		// Virtual time may not move the page's clock between two reads
		// of the counters, which a rate needs.
		"the XDP rate":      `id="xdp-rate"><dt>XDP answers</dt><dd>(…|[0-9.]+/s)<`,
		"the table version": `id="table-version"><dt>health table version</dt><dd>[1-9][0-9]*<`,
	} {
		if !regexp.MustCompile(re).MatchString(dom) {
			t.Errorf("the page does not show %s (%s):\n%s", what, re, dom)
		}
	}
	if strings.Contains(dom, readToken) {
		t.Error("the token is still in the page's address or DOM")
	}

	dir := os.Getenv("STEADYDNS_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "status-page.png")
	browse(t, env, chromium, "--screenshot="+shot, "--window-size=1000,1500", url)
	if info, err := os.Stat(shot); err != nil || info.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}

// browse loads url in headless Chromium in the edge host, where the API
// listens, with time for the page's script to fetch and render; it
// returns what Chromium prints.
func browse(t *testing.T, env *testenv.Env, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args = append([]string{"--net=" + env.Edge.NSPath(), "--", chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--hide-scrollbars"}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr)
	}
	return string(out)
}

// readAPI reads path from the edge's API with the read token.
func readAPI(t *testing.T, env *testenv.Env, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:9153"+path, nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := env.Edge.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
