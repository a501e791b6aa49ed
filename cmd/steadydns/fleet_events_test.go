package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// nsDialer dials NATS servers from inside a host's namespace.
type nsDialer struct{ h *testenv.Host }

func (d nsDialer) Dial(network, address string) (c net.Conn, err error) {
	err = d.h.Do(func() error {
		c, err = net.Dial(network, address)
		return err
	})
	return c, err
}

// testEvents: web2's backend stops and starts. Each edge's events API
// shows the change as the aggregator it follows judged it, and an
// operator's subscriber, with the admin key, receives the same event on
// steadydns.events.
func (r *fleetRig) testEvents(t *testing.T) {
	var urls []string
	for _, a := range r.f.Aggregators {
		urls = append(urls, "nats://"+a.V4.String()+":4222")
	}
	seed, err := nats.NkeyOptionFromSeed(r.seeds["admin"])
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), seed, nats.SetCustomDialer(nsDialer{r.f.Client}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	// By id and host: every aggregator judges each change and publishes
	// it under the same id, so that webhook receivers can drop repeats.
	published := map[string]api.EventView{}
	if _, err := nc.Subscribe("steadydns.events.*.*", func(m *nats.Msg) {
		var ev api.EventView
		if json.Unmarshal(m.Data, &ev) == nil && m.Subject == "steadydns.events."+ev.Cell+"."+ev.Host {
			mu.Lock()
			published[ev.ID+"@"+ev.Host] = ev
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r.stopBackend(1)
	r.waitAnswers(www, []string{"198.18.67.1"}, 4*fleetBound)
	r.startBackend(1)
	r.waitAnswers(www, []string{"198.18.67.1", "198.18.67.2"}, 4*fleetBound)
	for _, e := range r.f.Edges {
		var down api.EventView
		r.waitFor(e.Role+" showing web2 down", 4*fleetPush, func() bool {
			evs := r.edgeEvents(e, "check=web2&transition=down")
			if len(evs) == 0 {
				return false
			}
			down = evs[len(evs)-1]
			return true
		})
		if f := r.fleetView(e, e.Role).Following; down.Host != f || down.Cell != "default" || down.Records[0] != www {
			t.Errorf("%s shows %+v, want the change as %s, which it follows, judged it", e.Role, down, f)
		}
		r.waitFor("the event on nats", 4*fleetPush, func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, ok := published[down.ID+"@"+down.Host]
			return ok
		})
		mu.Lock()
		if p := published[down.ID+"@"+down.Host]; p.Check != "web2" || p.To != "unhealthy" || !p.Time.Equal(down.Time) {
			t.Errorf("nats carried %+v, the edge shows %+v", p, down)
		}
		mu.Unlock()
	}
}

// edgeEvents reads /api/v1/events?query of edge h.
func (r *fleetRig) edgeEvents(h *testenv.Host, query string) []api.EventView {
	r.t.Helper()
	resp, err := h.HTTPClient().Get("http://" + net.JoinHostPort(h.V4.String(), "9153") + "/api/v1/events?" + query)
	if err != nil {
		r.t.Fatalf("events of %s: %v", h.Role, err)
	}
	defer resp.Body.Close()
	var out struct{ Events []api.EventView }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		r.t.Fatalf("events of %s: %s", h.Role, resp.Status)
	}
	return out.Events
}
