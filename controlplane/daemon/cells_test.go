package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
	"github.com/steadydns/steadydns/testenv"
)

// cellsConfig is a fleet of two cells: web1 in cell a, web2 in cell b.
// The hosts under test are an edge and cell a's aggregator, which embeds
// the NATS server.
const cellsConfig = `server:
  interfaces: [%s]
  listen: ["198.18.0.2:53"]
  api: %s
  bpffs: %s
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, unhealthy_threshold: 1 }
  web2: { type: tcp, target: 198.18.1.2, port: 80, cell: b }
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web1 }
      - { value: 198.18.1.2, check: web2 }
aggregation:
  push_interval: 100ms
  table_size: 16
cluster:
  cells:
    - { name: a, probers: 1, aggregators: 1 }
    - { name: b, probers: 1, aggregators: 1 }
  capacity: { checks_per_prober: 8 }
  nats:
    urls: ["nats://127.0.0.1:4222"]
    embed: { listen: "127.0.0.1:4222", cluster_listen: "127.0.0.1:6222", routes: ["nats-route://127.0.0.1:6222"], store_dir: %s }
    hosts:
      p1: { roles: [prober], cell: a, key: %s }
      a1: { roles: [aggregator], cell: a, key: %s }
      b1: { roles: [aggregator], cell: b, key: %s }
      e1: { roles: [edge], key: %s }
`

type key struct{ pub, seed string }

func newKey(t *testing.T) key {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	f := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(f, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return key{pub, f}
}

// TestCellsMerge: an edge writes, for each cell's checks, the entries of
// the aggregator it follows in that cell; a cell not heard from yet fails
// open; the table is as old as its stalest cell; and the aggregator
// reports its use of the cell's capacity.
func TestCellsMerge(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	prb, agg, bgg, edg := newKey(t), newKey(t), newKey(t), newKey(t)
	env := testenv.Start(t, testenv.Options{})
	store := t.TempDir()
	aggCfg := filepath.Join(t.TempDir(), "a1.yaml")
	write(t, filepath.Join(filepath.Dir(aggCfg), "example.test.zone"), zoneFile)
	// The edge's state_dir is serveAs's; the aggregator needs its own.
	write(t, aggCfg, withState(fmt.Sprintf(cellsConfig, env.Edge.Link, "127.0.0.1:9154", "/sys/fs/bpf/unused", store, prb.pub, agg.pub, bgg.pub, edg.pub),
		filepath.Join(filepath.Dir(aggCfg), "state")))
	var a1 *daemon.Daemon
	err := env.Edge.Do(func() (err error) {
		a1, err = daemon.StartWith(aggCfg, daemon.Options{Netns: env.Edge.Do,
			Identity: daemon.Identity{Roles: []config.Role{config.RoleAggregator}, ID: "a1", Cell: "a", NKeySeed: agg.seed}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a1.Close() })
	e := serveAs(t, env, func(link, pins string) string {
		return fmt.Sprintf(cellsConfig, link, "127.0.0.1:9153", pins, store, prb.pub, agg.pub, bgg.pub, edg.pub)
	}, daemon.Identity{Roles: []config.Role{config.RoleEdge}, ID: "e1", NKeySeed: edg.seed})
	cfg, err := config.Load(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The hosts' hash folds in the table layout (Build).
	if _, err := fmt.Sscanf(a1.Fleet().ConfigHash, "%x", &cfg.Hash); err != nil {
		t.Fatal(err)
	}
	index := a1.Aggregator().Index()
	web1, _ := index.Entry("web1")
	web2, _ := index.Entry("web2")

	// The test's hosts connect in the edge's namespace, where the
	// embedded server listens.
	connect := func(id, cell string, k key) *transport.Conn {
		var c *transport.Conn
		err := env.Edge.Do(func() (err error) {
			c, err = transport.Connect(transport.Options{URLs: cfg.Cluster.NATS.URLs, ID: id, Cell: cell, NKeySeedFile: k.seed})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return c.WaitConnected(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	p1 := connect("p1", "a", prb)
	b1 := connect("b1", "b", bgg)

	status := func(id string) api.CheckView {
		for _, s := range e.d.Statuses() {
			if s.ID == id {
				return api.CheckView{ID: s.ID, Up: s.Up, Reason: s.Reason}
			}
		}
		t.Fatalf("no status for %s", id)
		return api.CheckView{}
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; statuses %+v, fleet %+v", what, e.d.Statuses(), e.d.Fleet())
			}
		}
	}

	// p1, cell a's prober, finds web1 down: cell a's table, from a1,
	// takes web1 out. Cell b has sent nothing: web2 fails open.
	frame := prober.Frame{ConfigHash: cfg.Hash, Prober: "p1", Region: "r1", Entries: make([]prober.Entry, cfg.FrameEntries())}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		for slot := uint64(1); ctx.Err() == nil; slot++ {
			frame.Version = slot
			frame.Entries[0] = prober.Entry{Index: web1, Seq: slot, Healthy: false, Reason: 1}
			b, _ := prober.Encode(nil, &frame)
			p1.Publish(transport.KindFrame, slot, cfg.Hash, b)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	eventually("web1 down from cell a's table", func() bool { return !e.d.Table().Meta().Cold && !e.d.Table().Up(web1) })
	if !e.d.Table().Up(web2) || !strings.Contains(status("web2").Reason, "no table of cell b yet") {
		t.Fatalf("web2 with cell b silent: up %v, %+v; want up, failing open", e.d.Table().Up(web2), status("web2"))
	}

	// b1, cell b's aggregator, says web2 is down and web1 up: the edge
	// takes web2 from b1 and keeps web1 from a1.
	table := make([]byte, healthtable.Bytes(cfg.Aggregation.TableSize))
	for i := range uint32(cfg.Aggregation.TableSize) {
		healthtable.Put(table, i, i != web2, 0)
	}
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan struct{})
	go func() {
		defer close(bdone)
		for slot := uint64(time.Now().UnixNano() / int64(100*time.Millisecond)); bctx.Err() == nil; slot++ {
			b1.Publish(transport.KindTable, slot, cfg.Hash, table)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	eventually("web2 down from cell b's table", func() bool { return !e.d.Table().Up(web2) })
	if e.d.Table().Up(web1) {
		t.Fatal("web1 came back up when cell b's table, which has it up, arrived")
	}
	f := e.d.Fleet()
	if f.Cell != "" || f.FollowingCells["a"] != "a1" || f.FollowingCells["b"] != "b1" || f.Following != "a1" {
		t.Fatalf("edge's fleet view %+v: want no cell, following a1 in a and b1 in b", f)
	}
	if f := a1.Fleet(); f.Cell != "a" {
		t.Fatalf("aggregator's fleet view %+v: want cell a", f)
	}
	if s := status("web2"); s.Reason != "from the table of b1" {
		t.Errorf("web2: %+v, want it from b1's table", s)
	}
	// Both cells send every 100 ms; a busy machine may hold one back for
	// a moment, so the age must come under a second, not stay there.
	eventually("a young table with both cells sending", func() bool { return e.d.Table().Meta().Age < time.Second })

	// Cell b goes silent: a1's tables keep coming, but the merged table is
	// as old as cell b's last, and web2 keeps b1's last state.
	stopB()
	<-bdone
	time.Sleep(1500 * time.Millisecond)
	if age := e.d.Table().Meta().Age; age < 1400*time.Millisecond {
		t.Fatalf("table age %v 1.5s after cell b's last table, want at least that", age)
	}
	if e.d.Table().Up(web2) {
		t.Fatal("web2 changed with cell b silent")
	}

	// Capacity: one checker heard × 8 frame entries, one edge connected.
	want := map[string][2]float64{"aggregator_checker_checks": {8, config.DefaultCheckerChecksPerAggregator}, "aggregator_edges": {1, config.DefaultEdgesPerAggregator}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a1.Metrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "steadydns_capacity_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cell"] != "a" {
				t.Errorf("%s with cell %q, want a", mf.GetName(), labels["cell"])
			}
			if got[labels["resource"]] == nil {
				got[labels["resource"]] = map[string]float64{}
			}
			got[labels["resource"]][mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	for res, w := range want {
		g := got[res]
		if g["steadydns_capacity_used"] != w[0] || g["steadydns_capacity_limit"] != w[1] || g["steadydns_capacity_used_ratio"] != w[0]/w[1] {
			t.Errorf("%s: %v, want used %v of %v", res, g, w[0], w[1])
		}
	}
	if len(got) != len(want) {
		t.Errorf("capacity resources %v, want %v", got, want)
	}
}
