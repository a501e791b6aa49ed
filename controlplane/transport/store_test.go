package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// revisions collects what a Watch reports.
type revisions struct {
	mu  sync.Mutex
	got []string
}

func (r *revisions) fn(v []byte, rev uint64) {
	r.mu.Lock()
	r.got = append(r.got, fmt.Sprintf("%d:%s", rev, v))
	r.mu.Unlock()
}

func (r *revisions) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.got)
}

// createStore creates the bucket as the admin, retrying while a new
// cluster elects its JetStream leader.
func createStore(t *testing.T, admin *Conn, replicas int) *ConfigStore {
	t.Helper()
	var st *ConfigStore
	eventually(t, 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		st, err = admin.CreateConfigStore(ctx, StoreOptions{History: 3, Replicas: replicas})
		return err == nil
	}, "config bucket created")
	return st
}

func TestConfigStore(t *testing.T) {
	f := newFleet(t)
	s := embed(t, f, EmbedOptions{})
	admin := connect(t, s.ClientURL(), "admin", f.admin, Options{})
	edge := connect(t, s.ClientURL(), "e1", f.edge, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := edge.CreateConfigStore(short, StoreOptions{}); err == nil {
		t.Fatal("an edge created the config bucket")
	}
	w := createStore(t, admin, 1)
	r, err := edge.OpenConfigStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Latest(ctx); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("empty bucket: Latest = %v, want ErrNoConfig", err)
	}
	if err := r.Revisions(ctx, func([]byte, uint64) bool { return true }); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("empty bucket: Revisions = %v, want ErrNoConfig", err)
	}
	rev1, err := w.Put(ctx, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	var seen revisions
	if err := r.Watch(ctx, seen.fn); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return seen.String() == fmt.Sprintf("[%d:one]", rev1) }, "the current config watched")
	rev2, err := w.Put(ctx, []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	rev3, err := w.Put(ctx, []byte("three"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[%d:one %d:two %d:three]", rev1, rev2, rev3)
	eventually(t, 5*time.Second, func() bool { return seen.String() == want }, "every new revision watched")
	v, rev, err := r.Latest(ctx)
	if err != nil || string(v) != "three" || rev != rev3 {
		t.Fatalf("newest = %q, %d, %v; want three, %d", v, rev, err, rev3)
	}
	// Newest first, so a host can take the newest one that validates.
	var history revisions
	if err := r.Revisions(ctx, func(v []byte, rev uint64) bool { history.fn(v, rev); return false }); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("[%d:three %d:two %d:one]", rev3, rev2, rev1); history.String() != want {
		t.Errorf("Revisions = %s, want %s", history.String(), want)
	}
	if v, err := r.Revision(ctx, rev2); err != nil || string(v) != "two" {
		t.Errorf("Revision(%d) = %q, %v; want two", rev2, v, err)
	}
	short, cancelShort = context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := r.Put(short, []byte("forged")); err == nil {
		t.Fatal("an edge wrote the config")
	}
}

// watchedStore is a bucket of n replicas on a cluster of n servers: w
// writes it as admin through the second last server, r reads and watches
// it as an edge (the connection edge) through the last, and seen holds
// what the watch saw.
func watchedStore(t *testing.T, n int, timeout time.Duration) (ctx context.Context, servers []*Server, edge *Conn, w, r *ConfigStore, seen *revisions) {
	f := newFleet(t)
	servers = cluster(t, f, n)
	admin := connect(t, servers[n-2].ClientURL(), "admin", f.admin, Options{})
	edge = connect(t, servers[n-1].ClientURL(), "e1", f.edge, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	w = createStore(t, admin, n)
	r, err := edge.OpenConfigStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen = &revisions{}
	if err := r.Watch(ctx, seen.fn); err != nil {
		t.Fatal(err)
	}
	return ctx, servers, edge, w, r, seen
}

func TestConfigStoreAcrossCluster(t *testing.T) {
	ctx, _, _, w, r, seen := watchedStore(t, 2, 20*time.Second)
	rev, err := w.Put(ctx, []byte("fleet v1"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return seen.String() == fmt.Sprintf("[%d:fleet v1]", rev) }, "the revision watched on the other server")
	v, got, err := r.Latest(ctx)
	if err != nil || string(v) != "fleet v1" || got != rev {
		t.Fatalf("newest on the other server = %q, %d, %v", v, got, err)
	}
}

// With three servers and three replicas the bucket keeps its quorum when a
// server dies: writes, reads and watches go on (README.md: two servers do
// not).
func TestConfigStoreSurvivesOneOfThreeServers(t *testing.T) {
	ctx, servers, edge, w, r, seen := watchedStore(t, 3, time.Minute)
	rev1, err := w.Put(ctx, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool { return seen.String() == fmt.Sprintf("[%d:v1]", rev1) }, "v1 watched")

	servers[0].Shutdown()
	var rev2 uint64
	eventually(t, 20*time.Second, func() bool {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		rev2, err = w.Put(c, []byte("v2"))
		return err == nil
	}, "a put after a server died")
	// A watch whose consumer lived on the dead server resumes once the
	// client misses its heartbeats and recreates it, several seconds on.
	eventually(t, 30*time.Second, func() bool { return seen.String() == fmt.Sprintf("[%d:v1 %d:v2]", rev1, rev2) }, "v2 watched after a server died")
	if v, got, err := r.Latest(ctx); err != nil || string(v) != "v2" || got != rev2 {
		t.Fatalf("newest after a server died = %q, %d, %v", v, got, err)
	}
	if _, err := edge.OpenConfigStore(ctx); err != nil {
		t.Fatal(err)
	}
}
