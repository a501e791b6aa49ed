package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
)

var event = health.Event{ID: "web1/unhealthy/42", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Check: "web1",
	Records: []string{"www.example.test."}, From: "healthy", To: "unhealthy", Reason: "timeout", Detail: "no reply in 1s",
	Host: "a1", Cell: "default"}

// TestPayload: the JSON every receiver gets, field by field, and back.
func TestPayload(t *testing.T) {
	want := `{"id":"web1/unhealthy/42","time":"2026-01-02T03:04:05Z","check":"web1","records":["www.example.test."],` +
		`"from":"healthy","to":"unhealthy","reason":"timeout","detail":"no reply in 1s","host":"a1","cell":"default"}`
	if got := string(Encode(&event)); got != want {
		t.Errorf("payload\n%s\nwant\n%s", got, want)
	}
	ev, err := Decode([]byte(want))
	if err != nil || !slices.Equal(ev.Records, event.Records) || ev.ID != event.ID || !ev.Time.Equal(event.Time) || ev.Host != "a1" {
		t.Errorf("decoded %+v, %v; want %+v", ev, err, event)
	}
	// A check without records has an empty list, not null.
	if got := string(Encode(&health.Event{Check: "db", From: "healthy", To: "unhealthy"})); !json.Valid([]byte(got)) || !strings.Contains(got, `"records":[]`) {
		t.Errorf("payload without records: %s", got)
	}
	// A traffic shift's event names its region and goes between its states.
	shift := `{"id":"r1/shifted/42","time":"2026-01-02T03:04:05Z","check":"","region":"r1","records":[],"from":"serving","to":"shifted","reason":"shifted","host":"a1","cell":"default"}`
	if ev, err := Decode([]byte(shift)); err != nil || ev.Region != "r1" || ev.To != health.ShiftShifted || string(Encode(&ev)) != shift {
		t.Errorf("shift event decoded %+v, %v", ev, err)
	}
	for _, bad := range []string{`{`, `{"check":"","from":"healthy","to":"unhealthy"}`, `{"check":"a","from":"up","to":"unhealthy"}`,
		`{"region":"r1","from":"healthy","to":"unhealthy"}`, `{"check":"a","region":"r1","from":"serving","to":"shifted"}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s): no error", bad)
		}
	}
}

func TestBackoff(t *testing.T) {
	tg := Target{Backoff: time.Second, MaxBackoff: 10 * time.Second}
	var got []time.Duration
	for n := range 6 {
		got = append(got, backoff(&tg, n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("backoffs %v, want %v", got, want)
	}
}

// counts records what a notifier observed, by target and outcome.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) observe(target, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[target+" "+outcome]++
}

func (c *counts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// waitFor polls ok with a generous deadline.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// receiver is a webhook that answers the codes given, in order, then 200,
// and keeps every request's body and Authorization.
type receiver struct {
	mu     sync.Mutex
	codes  []int
	bodies []string
	auth   []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.auth = append(r.auth, req.Header.Get("Authorization")+" "+req.Header.Get("Content-Type"))
	code := http.StatusOK
	if len(r.codes) > 0 {
		code, r.codes = r.codes[0], r.codes[1:]
	}
	r.mu.Unlock()
	w.WriteHeader(code)
}

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bodies)
}

// hook makes the webhook target of cfg's first webhook at url.
func hook(t *testing.T, url string, edit func(*config.Webhook)) Target {
	t.Helper()
	w := config.Webhook{URL: url, Name: "hook", Timeout: 5 * time.Second, Retries: 5, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Queue: 100}
	if edit != nil {
		edit(&w)
	}
	targets, err := Webhooks(&config.Config{Notify: config.Notify{Webhooks: []config.Webhook{w}}})
	if err != nil {
		t.Fatal(err)
	}
	return targets[0]
}

// TestRetries: a receiver that fails three times, with 503, 429 and 408,
// gets the same body a fourth time, which it takes.
func TestRetries(t *testing.T) {
	rc := &receiver{codes: []int{503, 429, 408}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	var c counts
	n := New(c.observe)
	defer n.Close()
	n.Configure([]Target{hook(t, srv.URL, nil)})
	n.Notify(event)
	waitFor(t, "delivery", func() bool { return c.get("hook sent") == 1 })
	bodies := rc.got()
	want := string(Encode(&event))
	if len(bodies) != 4 || slices.ContainsFunc(bodies, func(b string) bool { return b != want }) {
		t.Errorf("receiver got %q, want the event's payload four times", bodies)
	}
	if c.get("hook retried") != 3 || c.get("hook failed") != 0 {
		t.Errorf("counted %v, want 3 retried, 1 sent", c.n)
	}
}

// TestGivesUp: retries bound the attempts; a 4xx other than 408 and 429
// is not retried.
func TestGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		codes    []int
		attempts int
	}{
		{"server errors", []int{500, 502, 503, 504}, 3},
		{"bad request", []int{400, 500}, 1},
		{"unauthorized", []int{401}, 1},
	} {
		rc := &receiver{codes: tc.codes}
		srv := httptest.NewServer(rc)
		var c counts
		n := New(c.observe)
		n.Configure([]Target{hook(t, srv.URL, func(w *config.Webhook) { w.Retries = 2 })})
		n.Notify(event)
		waitFor(t, tc.name, func() bool { return c.get("hook failed") == 1 })
		if got := len(rc.got()); got != tc.attempts || c.get("hook sent") != 0 {
			t.Errorf("%s: %d attempts, counted %v; want %d and failed", tc.name, got, c.n, tc.attempts)
		}
		n.Close()
		srv.Close()
	}
}

// TestQueueDropsOldest: while the receiver holds the first event, a
// queue of two keeps the newest two of four more, and counts two drops.
func TestQueueDropsOldest(t *testing.T) {
	var c counts
	started, release := make(chan string, 10), make(chan struct{})
	var mu sync.Mutex
	var got []string
	n := New(c.observe)
	defer n.Close()
	n.Configure([]Target{{Name: "slow", Queue: 2, Timeout: time.Minute, Backoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Send: func(ctx context.Context, body []byte) error {
			ev, _ := Decode(body)
			started <- ev.Check
			<-release
			mu.Lock()
			got = append(got, ev.Check)
			mu.Unlock()
			return nil
		}}})
	ev := func(check string) health.Event {
		e := event
		e.Check = check
		return e
	}
	n.Notify(ev("c1"))
	if first := <-started; first != "c1" {
		t.Fatalf("first sent %s", first)
	}
	for _, check := range []string{"c2", "c3", "c4", "c5"} {
		n.Notify(ev(check))
	}
	close(release)
	waitFor(t, "three sent", func() bool { return c.get("slow sent") == 3 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"c1", "c4", "c5"}) || c.get("slow dropped") != 2 {
		t.Errorf("sent %v, dropped %d; want c1, c4, c5 and two dropped", got, c.get("slow dropped"))
	}
}

// TestWebhookFilterAndHeaders: only the events a webhook's filter
// selects reach it, with a header read from a file and the JSON type.
func TestWebhookFilterAndHeaders(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	secret := filepath.Join(t.TempDir(), "hook.auth")
	if err := os.WriteFile(secret, []byte("Bearer s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var c counts
	n := New(c.observe)
	defer n.Close()
	n.Configure([]Target{hook(t, srv.URL, func(w *config.Webhook) {
		w.HeaderFiles = map[string]string{"Authorization": secret}
		w.Events = config.EventFilter{Records: []string{"www.example.test."}, Transitions: []string{"down"}}
	})})
	up, other := event, event
	up.From, up.To = "unhealthy", "healthy"
	other.Records = []string{"api.example.test."}
	for _, ev := range []health.Event{up, other, event} {
		n.Notify(ev)
	}
	waitFor(t, "delivery", func() bool { return c.get("hook sent") == 1 })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) != 1 || rc.bodies[0] != string(Encode(&event)) || rc.auth[0] != "Bearer s3cret application/json" {
		t.Errorf("receiver got %q with %q; want the down event of www alone, with the file's token", rc.bodies, rc.auth)
	}
}

// TestHeaderFileMissing: a header file that cannot be read is an error
// naming its key.
func TestHeaderFileMissing(t *testing.T) {
	cfg := &config.Config{File: "steadydns.yaml", Notify: config.Notify{Webhooks: []config.Webhook{{URL: "http://198.18.0.9/",
		HeaderFiles: map[string]string{"Authorization": "/nonexistent/hook.auth"}}}}}
	_, err := Webhooks(cfg)
	if want := "steadydns.yaml: notify.webhooks[0].header_files.Authorization: open /nonexistent/hook.auth: no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestSkip: a held event that Skip says another host sent is dropped;
// the next is sent.
func TestSkip(t *testing.T) {
	var c counts
	sent := make(chan string, 2)
	n := New(c.observe)
	defer n.Close()
	n.Configure([]Target{{Name: "t", Queue: 10, Timeout: time.Second, Delay: time.Millisecond,
		Skip: func(ev *health.Event) bool { return ev.Check == "covered" },
		Send: func(_ context.Context, body []byte) error { ev, _ := Decode(body); sent <- ev.Check; return nil }}})
	covered, open := event, event
	covered.Check, open.Check = "covered", "open"
	n.Notify(covered)
	n.Notify(open)
	if got := <-sent; got != "open" {
		t.Errorf("sent %s first, want open: covered skipped", got)
	}
}
