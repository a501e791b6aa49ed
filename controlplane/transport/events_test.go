package transport

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// events collects what an events subscription receives.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) fn(cell, sender string, payload []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, cell+" "+sender+" "+string(payload))
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// TestEvents: an aggregator's events reach the edges, an admin and its
// cell's other aggregators, named by cell and sender; an edge may not
// publish one, nor a prober read them.
func TestEvents(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	agg := connect(t, s.ClientURL(), "a1", f.aggregator, Options{})
	peer := connect(t, s.ClientURL(), "a2", f.ids["a2"], Options{})
	edge := connect(t, s.ClientURL(), "e1", f.edge, Options{})
	admin := connect(t, s.ClientURL(), "admin", f.admin, Options{})
	prober := connect(t, s.ClientURL(), "p1", f.prober, Options{})
	var atEdge, atAdmin, atPeer events
	for _, sub := range []struct {
		c    *Conn
		cell string
		e    *events
	}{{edge, AllCells, &atEdge}, {admin, AllCells, &atAdmin}, {peer, "c1", &atPeer}} {
		if _, err := sub.c.SubscribeEvents(sub.cell, sub.e.fn); err != nil {
			t.Fatal(err)
		}
		flush(t, sub.c)
	}
	if _, err := prober.SubscribeEvents(AllCells, func(string, string, []byte) {}); err != nil {
		t.Fatal(err)
	}
	flush(t, prober)
	eventually(t, 5*time.Second, func() bool { return prober.Counters().PermissionErrors == 1 }, "the prober's subscription refused")
	// Published before the aggregator's: had it gone through, it would
	// arrive first.
	if err := edge.PublishEvent([]byte(`forged`)); err != nil {
		t.Fatal(err)
	}
	flush(t, edge)
	if err := agg.PublishEvent([]byte(`{"check":"web1"}`)); err != nil {
		t.Fatal(err)
	}
	want := []string{`c1 a1 {"check":"web1"}`}
	for who, e := range map[string]*events{"edge": &atEdge, "admin": &atAdmin, "a2": &atPeer} {
		eventually(t, 5*time.Second, func() bool { return len(e.list()) > 0 }, who+" receiving the event")
		if got := e.list(); !slices.Equal(got, want) {
			t.Errorf("%s received %q, want %q", who, got, want)
		}
	}
	eventually(t, 5*time.Second, func() bool { return edge.Counters().PermissionErrors == 1 }, "the edge's event refused")
}
