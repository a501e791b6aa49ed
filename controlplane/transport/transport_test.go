package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// inbox collects delivered messages for tests.
type inbox struct {
	mu  sync.Mutex
	got []Message
}

func (b *inbox) fn(m Message) {
	m.Payload = bytes.Clone(m.Payload)
	b.mu.Lock()
	b.got = append(b.got, m)
	b.mu.Unlock()
}

func (b *inbox) messages() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Message(nil), b.got...)
}

// wire records the size of every message on subject, as the server
// delivers them.
func wire(t *testing.T, url string, who identity, subject string) func() []int {
	t.Helper()
	c := connect(t, url, "wire", who, Options{})
	var mu sync.Mutex
	var sizes []int
	if _, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
		mu.Lock()
		sizes = append(sizes, len(m.Data))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	flush(t, c)
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), sizes...)
	}
}

func TestPublishSubscribeRoundTrip(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	prober := connect(t, s.ClientURL(), "p1", f.prober, Options{Roles: []Role{RoleProber}})
	agg := connect(t, s.ClientURL(), "a1", f.aggregator, Options{Roles: []Role{RoleAggregator}})
	var got inbox
	sub, err := agg.Subscribe(KindFrame, "c1", Filter{Hash: func(h uint64) bool { return h == 42 }}, got.fn)
	if err != nil {
		t.Fatal(err)
	}
	sizes := wire(t, s.ClientURL(), f.aggregator, SubjectAll(KindFrame, "c1"))
	flush(t, agg)

	limit := prober.MaxChunk()
	if limit != 1<<20-HeaderSize {
		t.Fatalf("chunk limit %d, want the default max_payload (1 MiB) less the header", limit)
	}
	total := 0
	for slot, n := range []int{1000, limit, limit + 1, 64 + 65536*24} {
		payload := randomPayload(n, uint64(n))
		if err := prober.Publish(KindFrame, uint64(slot+1), 42, payload); err != nil {
			t.Fatal(err)
		}
		count, size := Split(n, limit)
		eventually(t, 5*time.Second, func() bool { return len(got.messages()) == slot+1 }, fmt.Sprintf("%d bytes delivered", n))
		m := got.messages()[slot]
		if m.Sender != "p1" || m.Slot != uint64(slot+1) || m.Hash != 42 || !bytes.Equal(m.Payload, payload) {
			t.Fatalf("%d bytes: got sender %q slot %d hash %d, %d bytes (equal: %v)", n, m.Sender, m.Slot, m.Hash,
				len(m.Payload), bytes.Equal(m.Payload, payload))
		}
		total += count
		eventually(t, 5*time.Second, func() bool { return len(sizes()) == total }, fmt.Sprintf("%d chunks on the wire", total))
		for _, sz := range sizes()[total-count:] {
			if sz != HeaderSize+size {
				t.Fatalf("%d bytes: chunk of %d bytes on the wire, want %d chunks of %d", n, sz, count, HeaderSize+size)
			}
		}
	}
	if got := sub.Counters(); got.Delivered != 4 || got.Missing != 0 || got.Dropped != 0 {
		t.Fatalf("counters %+v", got)
	}
}

func TestMessagesOfAKindHaveOneSize(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	agg := connect(t, s.ClientURL(), "a1", f.aggregator, Options{ChunkSize: 100_000})
	sizes := wire(t, s.ClientURL(), f.edge, SubjectAll(KindTable, AllCells))
	// A 65,536-entry table, empty, a tenth full and full: every message the
	// same size, and as many of them.
	const n = 64 + 65536*8
	empty, tenth, full := make([]byte, n), make([]byte, n), randomPayload(n, 1)
	copy(tenth, full[:n/10])
	for slot, p := range [][]byte{empty, tenth, full} {
		if err := agg.Publish(KindTable, uint64(slot+1), 1, p); err != nil {
			t.Fatal(err)
		}
	}
	count, _ := Split(n, 100_000)
	eventually(t, 5*time.Second, func() bool { return len(sizes()) == 3*count }, "every chunk on the wire")
	got := sizes()
	for _, sz := range got {
		if sz != got[0] {
			t.Fatalf("message sizes %v: want one size", got)
		}
	}
}

func TestRoutedClusterDeliversTables(t *testing.T) {
	f := newFleet(t)
	servers := cluster(t, f, 2)
	agg := connect(t, servers[0].ClientURL(), "a1", f.aggregator, Options{})
	edge := connect(t, servers[1].ClientURL(), "e1", f.edge, Options{})
	var got inbox
	if _, err := edge.Subscribe(KindTable, AllCells, Filter{}, got.fn); err != nil {
		t.Fatal(err)
	}
	flush(t, edge)
	table := randomPayload(64+65536*8, 7)
	// The subscription's interest reaches the other server asynchronously:
	// publish each period until one arrives, as an aggregator does.
	slot := uint64(100)
	eventually(t, 5*time.Second, func() bool {
		slot++
		if err := agg.Publish(KindTable, slot, 9, table); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		return len(got.messages()) > 0
	}, "a table delivered across the route")
	m := got.messages()[0]
	if m.Sender != "a1" || m.Hash != 9 || !bytes.Equal(m.Payload, table) {
		t.Fatalf("got sender %q hash %d, %d bytes (equal: %v)", m.Sender, m.Hash, len(m.Payload), bytes.Equal(m.Payload, table))
	}
}

func TestRolePermissions(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	prober := connect(t, s.ClientURL(), "p1", f.prober, Options{})
	agg := connect(t, s.ClientURL(), "a1", f.aggregator, Options{})
	edge := connect(t, s.ClientURL(), "e1", f.edge, Options{})
	var tables, frames inbox
	if _, err := edge.Subscribe(KindTable, AllCells, Filter{}, tables.fn); err != nil {
		t.Fatal(err)
	}
	if _, err := agg.Subscribe(KindFrame, "c1", Filter{}, frames.fn); err != nil {
		t.Fatal(err)
	}
	flush(t, edge)
	flush(t, agg)

	// A prober may publish frames, and not tables.
	if err := prober.Publish(KindTable, 1, 1, []byte("forged table")); err != nil {
		t.Fatal(err)
	}
	if err := prober.Publish(KindFrame, 1, 1, []byte("frame")); err != nil {
		t.Fatal(err)
	}
	flush(t, prober)
	eventually(t, 5*time.Second, func() bool { return prober.Counters().PermissionErrors == 1 }, "the refused table counted")
	eventually(t, 5*time.Second, func() bool { return len(frames.messages()) == 1 }, "the frame delivered")
	// The edge receives the aggregator's table, published after the
	// prober's: had the forged one been delivered, it would be first.
	if err := agg.Publish(KindTable, 1, 1, []byte("table")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return len(tables.messages()) > 0 }, "the aggregator's table delivered")
	if got := tables.messages(); len(got) != 1 || got[0].Sender != "a1" {
		t.Fatalf("edge received %v, want only a1's table", got)
	}

	// An edge may not read frames, nor a prober tables.
	if _, err := prober.Subscribe(KindTable, AllCells, Filter{}, func(Message) {}); err != nil {
		t.Fatal(err)
	}
	flush(t, prober)
	eventually(t, 5*time.Second, func() bool { return prober.Counters().PermissionErrors == 2 }, "the refused subscription counted")

	// An unknown key does not get in.
	c, err := Connect(Options{URLs: []string{s.ClientURL()}, ID: "x", Cell: "c1", NKeySeedFile: newIdentity(t).Seed})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := c.WaitConnected(ctx); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("unknown key: WaitConnected = %v, want an authorization error", err)
	}
	if err := c.Publish(KindFrame, 1, 1, nil); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("publishing unconnected: %v, want ErrNotConnected", err)
	}
}

func TestTLS(t *testing.T) {
	f := newFleet(t)
	ca, cert, key := certs(t)
	s := embed(t, f, EmbedOptions{TLS: TLS{CA: ca, Cert: cert, Key: key}})
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	agg := connect(t, url, "a1", f.aggregator, Options{TLS: TLS{CA: ca}})
	edge := connect(t, url, "e1", f.edge, Options{TLS: TLS{CA: ca}})
	var got inbox
	if _, err := edge.Subscribe(KindTable, AllCells, Filter{}, got.fn); err != nil {
		t.Fatal(err)
	}
	flush(t, edge)
	if err := agg.Publish(KindTable, 1, 1, []byte("table")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return len(got.messages()) == 1 }, "a table over tls")

	// Without the CA the client cannot verify the server.
	c, err := Connect(Options{URLs: []string{url}, ID: "e2", Cell: "c1", NKeySeedFile: f.ids["e2"].Seed})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := c.WaitConnected(ctx); err == nil {
		t.Fatal("connected without the ca")
	}
}

// TestHostScope: a host's key publishes only under its own id and cell,
// reads only its own inbox, and the server counts every refusal.
func TestHostScope(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	agg := connect(t, s.ClientURL(), "a1", f.aggregator, Options{})
	var frames, states inbox
	if _, err := agg.Subscribe(KindFrame, "c1", Filter{}, frames.fn); err != nil {
		t.Fatal(err)
	}
	if _, err := agg.Subscribe(KindState, "", Filter{}, states.fn); err != nil {
		t.Fatal(err)
	}
	flush(t, agg)

	// p1's key under p2's id, and in cell c2: both refused.
	asP2 := connect(t, s.ClientURL(), "p2", f.prober, Options{})
	inC2 := connect(t, s.ClientURL(), "p1", f.prober, Options{Cell: "c2"})
	edge := connect(t, s.ClientURL(), "e1", f.edge, Options{})
	for _, c := range []*Conn{asP2, inC2} {
		if err := c.Publish(KindFrame, 1, 1, []byte("forged")); err != nil {
			t.Fatal(err)
		}
	}
	// An edge has no state subject, nor any frame to read.
	if err := edge.Publish(KindState, 1, 1, []byte("drain")); err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Subscribe(KindFrame, "c1", Filter{}, func(Message) {}); err != nil {
		t.Fatal(err)
	}
	// Nor another host's inbox.
	if _, err := edge.nc.Subscribe(InboxPrefix("a1")+".>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Conn{asP2, inC2, edge} {
		flush(t, c)
	}
	eventually(t, 5*time.Second, func() bool { r := s.Refused(); return r.Publish == 3 && r.Subscribe == 2 },
		"three publishes and two subscriptions refused")
	// The real p1 in its own cell gets through, after the forgeries.
	p1 := connect(t, s.ClientURL(), "p1", f.prober, Options{})
	if err := p1.Publish(KindFrame, 1, 1, []byte("real")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return len(frames.messages()) == 1 }, "p1's frame delivered")
	if got := frames.messages(); got[0].Sender != "p1" || string(got[0].Payload) != "real" {
		t.Fatalf("aggregator got %+v, want p1's frame only", got)
	}
	if got := states.messages(); len(got) != 0 {
		t.Fatalf("aggregator got the edge's state change: %+v", got)
	}
}

// TestRouteAuth: a server joins the cluster only with an aggregator's
// signature; a route without credentials, or with a made-up one, is
// refused and counted.
func TestRouteAuth(t *testing.T) {
	f := newFleet(t)
	servers := cluster(t, f, 2)
	target := "nats-route://" + servers[0].ClusterAddr()
	for _, user := range []*url.Userinfo{nil, url.UserPassword("s1", "bm90IGEgc2lnbmF0dXJl"), url.UserPassword("e1", "")} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		u.User = user
		rogue, err := server.NewServer(&server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "steadydns", Host: "127.0.0.1", Port: server.RANDOM_PORT}, Routes: []*url.URL{u}})
		if err != nil {
			t.Fatal(err)
		}
		before := servers[0].Refused().Routes
		rogue.Start()
		eventually(t, 10*time.Second, func() bool { return servers[0].Refused().Routes > before }, "the rogue route refused")
		if n := rogue.NumRoutes(); n != 0 {
			t.Fatalf("the rogue server holds %d routes, want none", n)
		}
		rogue.Shutdown()
	}
}

// TestSetHosts: hosts added to a running server get in, and a host removed
// is disconnected and kept out, without a restart.
func TestSetHosts(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	p1 := connect(t, s.ClientURL(), "p1", f.prober, Options{})
	newcomer := newIdentity(t)
	hosts := slices.DeleteFunc(slices.Clone(f.hosts), func(h Host) bool { return h.ID == "p1" })
	hosts = append(hosts, Host{ID: "p3", Key: newcomer.Public, Roles: []Role{RoleProber}, Cell: "c1"})
	if err := s.SetHosts(hosts); err != nil {
		t.Fatal(err)
	}
	connect(t, s.ClientURL(), "p3", newcomer, Options{})
	eventually(t, 5*time.Second, func() bool { return !p1.Connected() }, "p1 disconnected")
	time.Sleep(1500 * time.Millisecond) // a reconnect attempt or more
	if p1.Connected() {
		t.Fatal("p1, removed, got back in")
	}
	if err := s.SetHosts(append(hosts, hosts[0])); err == nil {
		t.Fatal("a host listed twice was taken")
	}
}
