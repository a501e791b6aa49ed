package fleetbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
)

// fleetKeys are one NKey per host, as a fleet's hosts have: the seed
// files the connections prove themselves with, and the hosts an embedded
// server lets in, each under its own id. A host's key is made the first
// time it is asked for.
type fleetKeys struct {
	dir string
	ids map[string]fleetKey
}

type fleetKey struct {
	seed, pub string
	role      transport.Role
}

func newFleetKeys(dir string) (*fleetKeys, error) {
	return &fleetKeys{dir: dir, ids: map[string]fleetKey{}}, nil
}

// seed is the seed file of host id, which plays role.
func (k *fleetKeys) seed(id string, role transport.Role) (string, error) {
	if h, ok := k.ids[id]; ok {
		return h.seed, nil
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("making an nkey: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("making an nkey: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("making an nkey: %w", err)
	}
	f := filepath.Join(k.dir, id+".seed")
	if err := os.WriteFile(f, seed, 0o600); err != nil {
		return "", fmt.Errorf("writing an nkey seed: %w", err)
	}
	k.ids[id] = fleetKey{seed: f, pub: pub, role: role}
	return f, nil
}

// cellHosts makes the keys of a cell's aggregator, probers and edges and
// returns them as the servers list them and as cluster.nats.hosts lines.
func (k *fleetKeys) cellHosts(s cellSpec) ([]transport.Host, string, error) {
	ids := []string{"agg"}
	roles := []transport.Role{transport.RoleAggregator}
	for i := range s.checkers {
		ids, roles = append(ids, fmt.Sprintf("p%d", i)), append(roles, transport.RoleProber)
	}
	for i := range s.edges {
		ids, roles = append(ids, fmt.Sprintf("e%d", i)), append(roles, transport.RoleEdge)
	}
	var hosts []transport.Host
	var b strings.Builder
	b.WriteString("    hosts:\n")
	for i, id := range ids {
		if _, err := k.seed(id, roles[i]); err != nil {
			return nil, "", err
		}
		h := k.ids[id]
		hosts = append(hosts, transport.Host{ID: id, Key: h.pub, Roles: []transport.Role{h.role}, Cell: config.DefaultCell})
		fmt.Fprintf(&b, "      %s: { roles: [%s], key: %s }\n", id, h.role, h.pub)
	}
	return hosts, b.String(), nil
}

// cellSpec is one fleet under measurement: an aggregator process fed by
// synthetic probers and read by simulated edges.
type cellSpec struct {
	name      string // unique within a run: the scratch directory and the ids
	checks    int    // configured checks, all in one table of tableSize entries
	unhealthy int    // percent of the checks every prober reports failing
	checkers  int    // synthetic probers
	edges     int    // simulated edges
	embed     bool   // the aggregator runs the NATS server; else the harness does
}

// cell is a running fleet: a NATS server (the harness's, or the
// aggregator's own), the aggregator as its own process on the aggregator
// CPU, probers publishing real frames, and edges reassembling tables.
type cell struct {
	spec   cellSpec
	o      *FleetOptions
	srv    *transport.Server // nil when the aggregator embeds the server
	agg    *exec.Cmd
	api    string
	cfg    *config.Config
	index  *health.Index
	probes []*transport.Conn
	edges  []*edgeSim
	args   []string // the aggregator's command line
	cmd    string   // the same, for the report
	dir    string

	exited  chan struct{} // closed when the aggregator has exited
	exitErr error

	// offset is when in every push period the probers publish, in ns
	// after its start: less than half a period, so the aggregator's push
	// carries the period's frames. A change applies from the period after
	// the next.
	offset atomic.Int64

	stop chan struct{}
	done sync.WaitGroup

	mu       sync.Mutex
	pubErrs  int
	firstErr error
}

// edgeSim is one simulated edge: a NATS connection that reassembles every
// table and counts the complete ones. The first edge of a cell also checks
// what the tables say, so a figure cannot come from tables that ignored the
// frames.
type edgeSim struct {
	conn *transport.Conn
	sub  *transport.Subscription

	mu    sync.Mutex
	slot  uint64 // the newest table's push slot
	down  int    // entries down in it, when counted
	bytes int
}

// freePort is a TCP port on 127.0.0.1 nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startCell brings up one fleet and waits until the edges receive tables
// that reflect the probers' frames.
func startCell(ctx context.Context, o *FleetOptions, keys *fleetKeys, dir string, s cellSpec) (c *cell, err error) {
	c = &cell{spec: s, o: o, stop: make(chan struct{}), dir: filepath.Join(dir, s.name)}
	defer func() {
		if err != nil {
			c.close()
			c = nil
		}
	}()
	dir = c.dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c, fmt.Errorf("making %s: %w", dir, err)
	}
	apiPort, err := freePort()
	if err != nil {
		return c, err
	}
	c.api = fmt.Sprintf("127.0.0.1:%d", apiPort)
	hosts, hostLines, err := keys.cellHosts(s)
	if err != nil {
		return c, err
	}
	var url, embed string
	if s.embed {
		p1, err := freePort()
		if err != nil {
			return c, err
		}
		p2, err := freePort()
		if err != nil {
			return c, err
		}
		url = fmt.Sprintf("nats://127.0.0.1:%d", p1)
		// JetStream in a cluster needs configured routes; a server skips
		// its own.
		embed = fmt.Sprintf("    embed:\n      listen: 127.0.0.1:%d\n      cluster_listen: 127.0.0.1:%d\n      routes: [\"nats-route://127.0.0.1:%d\"]\n      store_dir: %s\n",
			p1, p2, p2, filepath.Join(dir, "nats"))
	} else {
		if c.srv, err = transport.Embed(transport.EmbedOptions{Listen: "127.0.0.1:0", ServerName: s.name,
			Hosts: hosts, StoreDir: filepath.Join(dir, "nats")}); err != nil {
			return c, err
		}
		url = c.srv.ClientURL()
	}
	path := filepath.Join(dir, "aggregator.yaml")
	if err := writeFleetConfig(path, s, o.Push, c.api, url, embed+hostLines, filepath.Join(dir, "state")); err != nil {
		return c, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return c, err
	}
	// The plan is what the aggregator computes from the same file: the
	// table's indexes, and the config hash with them in it.
	plan, err := daemon.Build(cfg, nil)
	if err != nil {
		return c, err
	}
	c.cfg, c.index = plan.Config, plan.Index
	c.args = []string{"taskset", "-c", strconv.Itoa(o.AggCPU), o.Binary, "serve", "--config", path,
		"--role", "aggregator", "--id", "agg", "--nkey-seed", keys.ids["agg"].seed}
	c.cmd = strings.Join(c.args, " ")
	if err := c.startAggregator(); err != nil {
		return c, err
	}
	frames, err := c.frames()
	if err != nil {
		return c, err
	}
	for i := range s.checkers {
		conn, err := c.connect(url, fmt.Sprintf("p%d", i), transport.RoleProber, keys)
		if err != nil {
			return c, err
		}
		c.probes = append(c.probes, conn)
	}
	for i := range s.edges {
		conn, err := c.connect(url, fmt.Sprintf("e%d", i), transport.RoleEdge, keys)
		if err != nil {
			return c, err
		}
		e := &edgeSim{conn: conn}
		count := i == 0
		if e.sub, err = conn.Subscribe(transport.KindTable, transport.AllCells, transport.Filter{Hash: func(h uint64) bool { return h == c.cfg.Hash }}, func(m transport.Message) {
			e.take(m, count)
		}); err != nil {
			return c, err
		}
		c.edges = append(c.edges, e)
	}
	c.done.Add(1)
	go c.publish(frames)
	return c, c.waitTables(ctx, 0)
}

// startAggregator starts the aggregator process, its output appended to
// the cell's aggregator.log.
func (c *cell) startAggregator() error {
	log, err := os.OpenFile(filepath.Join(c.dir, "aggregator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the aggregator's log: %w", err)
	}
	defer log.Close()
	c.agg = exec.Command(c.args[0], c.args[1:]...)
	c.agg.Stdout, c.agg.Stderr = log, log
	if err := c.agg.Start(); err != nil {
		return fmt.Errorf("starting the aggregator: %w", err)
	}
	exited := make(chan struct{})
	c.exited = exited
	agg := c.agg
	go func() { c.exitErr = agg.Wait(); close(exited) }()
	return nil
}

// restart replaces the aggregator with a new process of the same config
// and returns the push slot after which the edge's tables are the new
// process's (waitTables). Where the kernel puts a process's memory makes
// the same work cost it a few percent more or less for as long as it
// lives; a new process each run turns that into noise the runs' median
// absorbs, where one process per cell made it a difference between cells.
func (c *cell) restart() (uint64, error) {
	c.agg.Process.Kill()
	<-c.exited
	// A table of a later slot than this can only be the new process's.
	since := uint64(time.Now().UnixNano() / int64(c.o.Push))
	return since, c.startAggregator()
}

func (c *cell) connect(url, id string, role transport.Role, keys *fleetKeys) (*transport.Conn, error) {
	conn, err := transport.Connect(transport.Options{URLs: []string{url}, ID: id, Cell: config.DefaultCell, Roles: []transport.Role{role},
		NKeySeedFile: keys.ids[id].seed})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.WaitConnected(ctx); err != nil {
		conn.Close()
		log, _ := os.ReadFile(filepath.Join(c.dir, "aggregator.log"))
		return nil, fmt.Errorf("connecting %s: %w (the aggregator's log ends: %s)", id, err, lastLines(log, 5))
	}
	return conn, nil
}

// writeFleetConfig writes an aggregator's config: the cell's checks as
// TCP checks (the aggregator never runs them), one table of tableSize
// entries, frames of tableSize entries (checks_per_prober), a capacity that
// holds the cell's probers and edges, its own state_dir, and the cluster
// section.
func writeFleetConfig(path string, s cellSpec, push time.Duration, api, url, embed, stateDir string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  listen: [\"127.0.0.1:53\"]\n  api: %s\n  state_dir: %s\nhealth_checks:\n", api, stateDir)
	for i := range s.checks {
		fmt.Fprintf(&b, "  c%d: {type: tcp, target: 198.18.0.2, port: 80, interval: %s, unhealthy_threshold: 1, healthy_threshold: 1}\n", i, push)
	}
	fmt.Fprintf(&b, "aggregation:\n  push_interval: %s\n  table_size: %d\n", push, tableSize)
	fmt.Fprintf(&b, "cluster:\n  capacity:\n    checks_per_prober: %d\n    checker_checks_per_aggregator: %d\n    edges_per_aggregator: %d\n",
		tableSize, max(s.checkers, 1)*tableSize, max(s.edges, 1))
	fmt.Fprintf(&b, "  nats:\n    urls: [%q]\n%s", url, embed)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing the aggregator's config: %w", err)
	}
	return nil
}

// frames builds every prober's frame: one result for every configured
// check, the first unhealthy percent of them failing, padded to the
// config's frame entries, as prober.Framer encodes them.
func (c *cell) frames() ([][]byte, error) {
	index, checks := c.index, &c.cfg.Checks
	probes := map[string]prober.Probe{}
	for k := range checks.Len() {
		probes[checks.ID(k)] = prober.Probe{Index: index.EntryOf(k)}
	}
	failing := checks.Len() * c.spec.unhealthy / 100
	out := make([][]byte, c.spec.checkers)
	for p := range out {
		f, err := prober.NewFramer(fmt.Sprintf("p%d", p), "", c.cfg.FrameEntries())
		if err != nil {
			return nil, err
		}
		if err := f.Configure(c.cfg.Hash, probes); err != nil {
			return nil, err
		}
		for k := range checks.Len() {
			f.Record(prober.Result{ID: checks.ID(k), Index: index.EntryOf(k), Seq: 1, Healthy: k >= failing})
		}
		out[p] = f.AppendFrame(nil, 1)
	}
	return out, nil
}

// publish sends every prober's frame at the start of every push period, as
// prober.Framer.Run does, or the cell's offset after it, each result with a
// new seq as the next run's would have.
func (c *cell) publish(frames [][]byte) {
	defer c.done.Done()
	period := c.o.Push
	for {
		now := time.Now()
		next := now.Truncate(period).Add(time.Duration(c.offset.Load()))
		if !next.After(now) {
			next = next.Add(period)
		}
		wait := next.Sub(now)
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		slot := uint64(time.Now().UnixNano() / int64(period))
		for i, f := range frames {
			binary.LittleEndian.PutUint64(f[16:], slot) // the frame's version
			for p := prober.HeaderSize; p+prober.EntrySize <= len(f); p += prober.EntrySize {
				if seq := binary.LittleEndian.Uint64(f[p+8:]); seq != 0 {
					binary.LittleEndian.PutUint64(f[p+8:], seq+1)
				}
			}
			if err := c.probes[i].Publish(transport.KindFrame, slot, c.cfg.Hash, f); err != nil {
				c.mu.Lock()
				c.pubErrs++
				if c.firstErr == nil {
					c.firstErr = err
				}
				c.mu.Unlock()
			}
		}
	}
}

// take is an edge receiving a table; the counting edge counts its entries
// down, which is what an edge would write into XDP's map.
func (e *edgeSim) take(m transport.Message, count bool) {
	down := -1
	if count {
		down = 0
		for i := uint32(1); i < tableSize; i++ {
			if !healthtable.Up(m.Payload, i) {
				down++
			}
		}
	}
	e.mu.Lock()
	e.slot, e.down, e.bytes = m.Slot, down, len(m.Payload)
	e.mu.Unlock()
}

func (e *edgeSim) state() (slot uint64, down, bytes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slot, e.down, e.bytes
}

// waitTables waits until the first edge has a table of a push slot after
// the given one that shows the probers' verdicts: as many entries down as
// checks fail. Entries no check owns start healthy and nothing reports for
// them, so they stay up.
func (c *cell) waitTables(ctx context.Context, after uint64) error {
	want := c.spec.checks * c.spec.unhealthy / 100
	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := c.failed(); err != nil {
			return err
		}
		slot, down, _ := c.edges[0].state()
		if slot > after && down == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cell %s: tables show %d entries down after 90 s, want %d (the edge's chunks: %+v)",
				c.spec.name, down, want, c.edges[0].sub.Counters())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// failed reports an aggregator that exited.
func (c *cell) failed() error {
	select {
	case <-c.exited:
		log, _ := os.ReadFile(filepath.Join(c.dir, "aggregator.log"))
		return fmt.Errorf("cell %s: the aggregator exited (%v): %s", c.spec.name, c.exitErr, lastLines(log, 5))
	default:
		return nil
	}
}

func (c *cell) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.done.Wait()
	for _, e := range c.edges {
		e.conn.Close()
	}
	for _, p := range c.probes {
		p.Close()
	}
	if c.exited != nil {
		c.agg.Process.Kill()
		<-c.exited
	}
	if c.srv != nil {
		c.srv.Shutdown()
	}
}

// snapshot is everything a window's figures are differences of.
type snapshot struct {
	at       time.Time
	cpu      time.Duration // the aggregator process's CPU time so far
	slot     uint64        // the first edge's newest table
	tables   []uint64      // per edge, complete tables so far
	links    map[string]uint64
	frames   map[string]float64 // the aggregator's steadydns_fleet_messages_total{kind="frame"} by result
	pushSecs float64
}

// Link names of the snapshot's byte counts.
const (
	linkProberOut = "prober → NATS"
	linkAggIn     = "NATS → aggregator"
	linkAggOut    = "aggregator → NATS"
	linkEdgeIn    = "NATS → edge"
)

// snapshot reads the counters. The aggregator's /metrics, read only when
// asked, comes first: it lists every check, and reading it costs the
// aggregator CPU in proportion to the checks, which must stay out of the
// next window.
func (c *cell) snapshot(metrics bool) (snapshot, error) {
	s := snapshot{links: map[string]uint64{}}
	var err error
	if metrics {
		if s.frames, s.pushSecs, err = c.metrics(); err != nil {
			return s, err
		}
	}
	s.at = time.Now()
	if s.cpu, err = processCPU(c.agg.Process.Pid); err != nil {
		return s, err
	}
	s.slot, _, _ = c.edges[0].state()
	for _, e := range c.edges {
		s.tables = append(s.tables, e.sub.Counters().Delivered)
	}
	if c.srv != nil {
		clients, err := c.srv.Clients()
		if err != nil {
			return s, err
		}
		for _, t := range clients {
			switch {
			case strings.Contains(t.Name, "(aggregator)"):
				s.links[linkAggIn] += t.InBytes
				s.links[linkAggOut] += t.OutBytes
			case strings.Contains(t.Name, "(prober)"):
				s.links[linkProberOut] += t.OutBytes
			case strings.Contains(t.Name, "(edge)"):
				s.links[linkEdgeIn] += t.InBytes
			}
		}
	} else {
		for _, p := range c.probes {
			s.links[linkProberOut] += p.Traffic().OutBytes
		}
		for _, e := range c.edges {
			s.links[linkEdgeIn] += e.conn.Traffic().InBytes
		}
	}
	return s, nil
}

// metrics reads the aggregator's frame counts and last push time from its
// /metrics.
func (c *cell) metrics() (map[string]float64, float64, error) {
	resp, err := http.Get("http://" + c.api + "/metrics")
	if err != nil {
		return nil, 0, fmt.Errorf("reading the aggregator's metrics: %w", err)
	}
	defer resp.Body.Close()
	frames := map[string]float64{}
	var push float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		name, value, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case name == "steadydns_health_push_seconds":
			push = v
		case strings.HasPrefix(name, `steadydns_fleet_messages_total{kind="frame",result="`):
			frames[strings.TrimSuffix(strings.TrimPrefix(name, `steadydns_fleet_messages_total{kind="frame",result="`), `"}`)] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading the aggregator's metrics: %w", err)
	}
	return frames, push, nil
}

// processCPU is the CPU time every thread of process pid has run, from
// /proc/PID/task/*/schedstat: the scheduler's nanoseconds, where
// /proc/PID/stat counts in clock ticks, too coarse for one push's work.
// A thread that has exited is no longer counted; Go keeps its threads.
func processCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("reading the aggregator's threads: %w", err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread has just exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", filepath.Join(dir, t.Name(), "schedstat"), err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// window is what a cell did between two snapshots, per push.
type window struct {
	Pushes      int                // push slots the first edge saw go by
	CPUPerPush  time.Duration      // the aggregator process
	CPUShare    float64            // of one CPU, over the window
	BytesPush   map[string]float64 // per link, all connections of the kind together
	Tables      float64            // complete tables per edge per push, the least of the edges
	Frames      float64            // frames the aggregator delivered per prober per push
	PushSeconds float64            // the aggregator's last push, at the end
}

func diff(a, b snapshot, s cellSpec) (window, error) {
	w := window{Pushes: int(b.slot - a.slot), BytesPush: map[string]float64{}, PushSeconds: b.pushSecs}
	if w.Pushes <= 0 {
		return w, errors.New("no table reached the edges in the window")
	}
	p := float64(w.Pushes)
	w.CPUPerPush = (b.cpu - a.cpu) / time.Duration(w.Pushes)
	w.CPUShare = float64(b.cpu-a.cpu) / float64(b.at.Sub(a.at))
	for k, v := range b.links {
		w.BytesPush[k] = float64(v-a.links[k]) / p
	}
	w.Tables = -1
	for i := range b.tables {
		n := b.tables[i] - a.tables[i]
		if t := float64(n) / p; w.Tables < 0 || t < w.Tables {
			w.Tables = t
		}
	}
	if s.checkers > 0 {
		w.Frames = (b.frames["delivered"] - a.frames["delivered"]) / p / float64(s.checkers)
	}
	return w, nil
}

// measure runs the cell for pushes push periods.
func (c *cell) measure(ctx context.Context, pushes int) (window, error) {
	if err := quarter(ctx, c.o.Push, 0); err != nil {
		return window{}, err
	}
	a, err := c.snapshot(true)
	if err != nil {
		return window{}, err
	}
	if err := quarter(ctx, c.o.Push, pushes); err != nil {
		return window{}, err
	}
	if err := c.failed(); err != nil {
		return window{}, err
	}
	b, err := c.snapshot(true)
	if err != nil {
		return window{}, err
	}
	return diff(a, b, c.spec)
}

// lastLines is the end of a log, for an error message.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// quarter waits until three quarters into the push period pushes periods
// from now: probers publish at the start of a period and aggregators push
// at its middle, so by then a period's messages have all arrived, and a
// window between two such instants holds whole periods only.
func quarter(ctx context.Context, period time.Duration, pushes int) error {
	now := time.Now()
	next := now.Truncate(period).Add(3 * period / 4)
	if !next.After(now) {
		next = next.Add(period)
	}
	return sleepCtx(ctx, next.Add(time.Duration(pushes)*period).Sub(now))
}
