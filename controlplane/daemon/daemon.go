package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/rrl"
	"github.com/steadydns/steadydns/controlplane/state"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/loader"
	"github.com/steadydns/steadydns/prober"
)

// Daemon is a running edge.
type Daemon struct {
	path     string
	objs     *loader.Objects
	agg      *health.Aggregator
	table    *edge.Table
	events   health.EventLog
	sched    *prober.Scheduler
	framer   *prober.Framer
	fb       *fallback.Server
	metrics  *api.Metrics
	outcomes []string
	ifindex  map[string]int // the configured interfaces, looked up in the namespace served
	id       Identity
	fleet    *fleet // nil on a single host: frames and tables pass in process

	mu        sync.Mutex // serialises reloads
	plan      atomic.Pointer[Plan]
	started   steps // what start started, for a failed start and Close to undo
	closeOnce sync.Once
	closeErr  error
}

// Options change where the daemon works; the zero value is this process.
type Options struct {
	// Netns runs a function in the network namespace the daemon serves
	// in. Start binds its sockets in the calling thread's namespace; the
	// prober opens sockets later, from its own goroutines, so a caller
	// that entered a namespace for one thread only (tests) must say so.
	Netns prober.Netns
	// Identity is this host's place in a fleet; the zero value plays
	// every role under the host name.
	Identity Identity
	// ResetState starts without a state file that cannot be used, moved
	// aside, rather than refusing to start (state.Recover).
	ResetState bool
}

// Start loads the config at path and brings the edge up: records and a
// first health table into the maps, the fallback listening, then XDP
// attached, so nothing XDP passes goes unanswered.
func Start(path string) (*Daemon, error) { return StartWith(path, Options{}) }

// StartWith is Start with options. A start that fails undoes, in reverse
// order, whatever it had started: nothing keeps running, no socket stays
// bound, and XDP is left as it was.
func StartWith(path string, opts Options) (*Daemon, error) {
	d := &Daemon{path: path, id: opts.Identity}
	d.metrics = api.NewMetrics(d)
	if err := d.start(opts); err != nil {
		if uerr := d.started.undo(true); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	return d, nil
}

// configWait bounds how long a host started with cluster.config: nats
// waits for the fleet's NATS servers and a first config revision.
const configWait = 60 * time.Second

// start brings the host up step by step; each step that starts something
// records how to undo it before the next step runs. An edge loads its maps,
// an aggregator builds its aggregator, a prober its scheduler; in a fleet
// they meet over NATS, on a single host in process.
func (d *Daemon) start(opts Options) error {
	cfg, err := config.Load(d.path)
	if err != nil {
		return err
	}
	id := d.id
	if cfg.Cluster.NATS != nil {
		if id, err = fleetIdentity(cfg, id); err != nil {
			return err
		}
		d.id = id
	}
	host := id.hostID()
	if err := transport.ValidSenderID(host); err != nil {
		return fmt.Errorf("--id: %w", err)
	}
	if cfg.Cluster.NATS == nil {
		if id.Roles != nil && len(id.Roles) != len(config.Roles) {
			return cfg.Errorf("cluster", "--role %s needs cluster.nats: without it one process plays every role", roleList(id.Roles))
		}
	} else if err := d.join(cfg, id); err != nil {
		return err
	}
	if cfg.Cluster.Config == config.ConfigNATS {
		ctx, cancel := context.WithTimeout(context.Background(), configWait)
		cfg, err = d.fetchConfig(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	p, err := Build(cfg, nil)
	if err != nil {
		return err
	}
	// What runs from here keeps the served config, without its lines.
	cfg = p.Config
	for _, w := range p.Compiled.Warnings {
		slog.Warn(w)
	}
	var seed health.Seed
	if id.has(config.RoleEdge) {
		if seed, err = d.startEdge(cfg); err != nil {
			return err
		}
		if d.fleet != nil {
			d.fleet.merge = edge.NewMerger(followTimeout(cfg), cfg.Aggregation.TableSize)
		}
	}
	if id.has(config.RoleAggregator) {
		var out health.Sink = d.table
		if d.fleet != nil {
			out = publisher{d.fleet.conn}
		}
		if seed.Saved, err = d.loadState(cfg.Server.StateDir, opts.ResetState); err != nil {
			return fmt.Errorf("server.state_dir %s: %w", cfg.Server.StateDir, err)
		}
		if d.agg, err = health.New(cfg, p.Index, out, seed, &d.events); err != nil {
			return err
		}
		// Written once now, so a state directory that cannot take the file
		// (full, read-only) stops the start instead of every later write
		// failing with only a warning.
		if err := d.saveState(cfg.Server.StateDir); err != nil {
			return fmt.Errorf("server.state_dir %s: %w", cfg.Server.StateDir, err)
		}
		d.agg.OnPush(d.metrics.ObservePush)
	}
	if id.has(config.RoleProber) {
		if d.framer, err = prober.NewFramer(host, id.Region, cfg.FrameEntries()); err != nil {
			return err
		}
		d.sched = prober.NewScheduler(prober.Options{Netns: opts.Netns, OnResult: func(r prober.Result) {
			d.framer.Record(r)
			if d.agg != nil {
				d.agg.Observe(r)
			}
			// The first results can come before the first plan is stored.
			if p := d.plan.Load(); p != nil {
				if k, ok := p.Config.Checks.Find(r.ID); ok {
					d.metrics.ObserveCheck(string(p.Config.Checks.Type(k)), r)
				}
			}
		}})
		d.started.push(func(context.Context) error { d.sched.Close(); return nil })
	}
	if err := d.apply(p); err != nil {
		return err
	}
	if id.has(config.RoleEdge) {
		if err := d.serveEdge(cfg, p); err != nil {
			return err
		}
	}
	if d.fleet != nil {
		if err := d.subscribeFleet(cfg, host); err != nil {
			return err
		}
	}
	srv, apiAddr, err := api.Serve(api.Handler(d, d.metrics), cfg)
	if err != nil {
		return err
	}
	d.started.push(srv.Shutdown)
	d.startLoops(cfg)
	slog.Info("serving", "config", d.path, "id", host, "roles", roleList(id.Roles), "listen", cfg.Server.Listen,
		"api", apiAddr.String(), "records", len(p.Compiled.Sets))
	return nil
}

func roleList(roles []config.Role) string {
	if roles == nil {
		roles = config.Roles
	}
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// startEdge loads the data plane's maps and the table in them. The pinned
// table an earlier run pushed is the aggregator's seed when it runs here
// too: the edge is not cold while it is fresh, and the checks take their
// first states from it, so a restart does not make every endpoint flap.
func (d *Daemon) startEdge(cfg *config.Config) (health.Seed, error) {
	var err error
	if d.outcomes, err = loader.OutcomeNames(); err != nil {
		return health.Seed{}, err
	}
	if d.objs, err = loader.Load(loadOptions(cfg)); err != nil {
		return health.Seed{}, err
	}
	d.started.push(func(context.Context) error { return d.objs.Close() })
	pinned := make([]byte, healthtable.Bytes(d.objs.HealthCapacity()))
	meta, err := d.objs.ReadHealth(pinned)
	if err != nil {
		return health.Seed{}, err
	}
	d.table = edge.New(d.objs, meta)
	if meta.Version == 0 {
		return health.Seed{}, nil
	}
	return health.Seed{ConfigHash: meta.ConfigHash, Table: pinned}, nil
}

// serveEdge starts the fallback and then attaches XDP, so nothing XDP
// passes goes unanswered.
func (d *Daemon) serveEdge(cfg *config.Config, p *Plan) error {
	d.ifindex = map[string]int{}
	opts := fallback.Options{Listen: cfg.Server.Listen, Observe: d.metrics.ObserveFallback, UDP: d.metrics.ObserveUDP, OnTCP: d.metrics.ObserveTCP, OnPanic: d.metrics.ObservePanic,
		TCP: fallback.TCPLimits{MaxConnections: cfg.Server.TCP.MaxConnections, MaxPerPrefix: cfg.Server.TCP.MaxPerPrefix,
			IdleTimeout: cfg.Server.TCP.IdleTimeout, MaxQueries: cfg.Server.TCP.MaxPipelined, MaxLifetime: cfg.Server.TCP.MaxLifetime},
		Debug: fallback.Debug{Name: cfg.Server.Debug.Name, Allow: cfg.Server.Debug.Allow, Explain: func(name string) []string { return api.DebugTXT(d, name) }}}
	if cfg.Server.RRL != nil {
		opts.RRL = rrl.New(d.objs)
	}
	if cfg.Server.IDServer {
		opts.ID = d.id.hostID()
	}
	if cfg.Server.VersionServer {
		opts.Version = Version()
	}
	opts.NSID = cfg.Server.NSID
	d.fb = fallback.New(opts, d.view(p))
	warnFileLimit(d.fb.TCPLimits().MaxConnections)
	if err := d.fb.Start(); err != nil {
		return err
	}
	d.started.push(d.fb.Shutdown)
	for _, ifname := range cfg.Server.Interfaces {
		// A link an earlier run pinned stays if this start fails, as it
		// stays when a daemon closes; one this start makes goes.
		earlier := d.objs.Linked(ifname)
		mode, err := d.objs.Attach(ifname, loader.Mode(cfg.Server.XDPMode))
		if err != nil {
			return err
		}
		if !earlier {
			d.started.pushFailed(func(context.Context) error { return d.objs.Detach(ifname) })
		}
		slog.Info("xdp attached", "interface", ifname, "mode", mode)
		iface, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", ifname, err)
		}
		d.ifindex[ifname] = iface.Index
	}
	// A server of another build or capacity may have left its maps: the
	// links now run this program, so nothing uses them.
	if err := d.objs.RemoveStaleLayouts(); err != nil {
		slog.Warn("removing stale maps", "error", err)
	}
	return nil
}

// fdReserve are the file descriptors counted for everything but TCP
// clients: sockets per CPU, maps, the API's and the prober's connections.
const fdReserve = 256

// warnFileLimit warns when the process may run out of file descriptors
// before the fallback reaches its TCP limit: accepts would then fail and
// clients wait in the backlog instead of an idle connection making room.
func warnFileLimit(maxConns int) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		slog.Warn("reading RLIMIT_NOFILE", "error", err)
		return
	}
	if uint64(maxConns)+fdReserve > lim.Cur {
		slog.Warn("server.tcp.max_connections is above what the file descriptor limit leaves for TCP clients: raise RLIMIT_NOFILE (LimitNOFILE= in systemd) or lower it",
			"max_connections", maxConns, "rlimit_nofile", lim.Cur, "reserved", fdReserve)
	}
}

// subscribeFleet receives what this host's roles take: an aggregator the
// probers' frames and the state changes of every host's API, an edge the
// tables of the aggregator it follows. A fleet config from the bucket is
// watched for new revisions.
func (d *Daemon) subscribeFleet(cfg *config.Config, host string) error {
	if d.agg != nil {
		// Only this cell's probers run this cell's checks.
		err := d.subscribe(transport.KindFrame, d.fleet.cell, func(m transport.Message) {
			now := time.Now()
			region := d.plan.Load().Config.Cluster.NATS.Hosts[m.Sender].Region
			if err := d.agg.IngestFrameFrom(m.Sender, region, m.Payload, now); err != nil {
				slog.Warn("result frame rejected", "from", m.Sender, "error", err)
				return
			}
			d.fleet.checkers.hear(m.Sender, now)
		})
		if err != nil {
			return err
		}
		if err := d.subscribe(transport.KindState, "", d.applyState); err != nil {
			return err
		}
	}
	if d.table != nil {
		err := d.subscribe(transport.KindTable, transport.AllCells, func(m transport.Message) {
			stale := uint64(d.plan.Load().Config.Aggregation.StaleAfter)
			err := d.fleet.merge.Take(m.Cell, m.Sender, m.Slot, m.Payload, time.Now(), func(table []byte, version, arrivedNs uint64) error {
				return d.table.WriteHealthAt(table, version, m.Hash, stale, arrivedNs)
			})
			if err != nil {
				slog.Warn("health table dropped", "from", m.Sender, "cell", m.Cell, "error", err)
			}
		})
		if err != nil {
			return err
		}
	}
	if d.fleet.store != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := d.watchConfig(ctx); err != nil && ctx.Err() == nil {
				slog.Error("watching the config bucket", "error", err)
			}
		}()
		d.started.push(func(context.Context) error { cancel(); <-done; return nil })
	}
	return nil
}

// followTimeout is how long an edge waits for the next table from the
// aggregator it follows before it follows another: three push periods, so
// one late or lost table does not make it switch.
func followTimeout(cfg *config.Config) time.Duration { return 3 * cfg.Aggregation.PushInterval }

// startLoops runs the prober's frames and the aggregator's pushes, once
// every push period, on threads of lower priority.
func (d *Daemon) startLoops(cfg *config.Config) {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if d.framer != nil {
		emit := func(b []byte) {
			if err := d.agg.IngestFrame(b, time.Now()); err != nil {
				slog.Warn("result frame rejected", "error", err)
			}
		}
		if d.fleet != nil {
			emit = func(b []byte) {
				p := d.plan.Load()
				slot := uint64(time.Now().UnixNano() / int64(p.Config.Aggregation.PushInterval))
				if err := d.fleet.conn.Publish(transport.KindFrame, slot, p.Config.Hash, b); err != nil {
					slog.Warn("publishing a result frame", "error", err)
				}
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			background()
			d.framer.Run(ctx, cfg.Aggregation.PushInterval, emit)
		}()
	}
	if d.agg != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			background()
			d.agg.Run(ctx)
		}()
	}
	if d.agg != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.keepState(ctx, cfg.Server.StateDir)
		}()
	}
	d.started.push(func(context.Context) error {
		stop()
		wg.Wait()
		if d.agg != nil {
			// The pushes have stopped: this is the last state.
			return d.saveState(cfg.Server.StateDir)
		}
		return nil
	})
}

// stateGap is the least time between two writes of the state file: a
// table of flapping checks changes every push, and the file holds every
// check.
const stateGap = time.Second

// loadState reads the state file an earlier run wrote and restores its
// health-check log; it returns the checks' saved states for the
// aggregator's seed. A file that cannot be used is moved aside and stops
// the start, unless reset: starting as if every check were healthy would
// answer with backends known dead or set down. With reset the checks
// start from the pinned table, when there is one of this config, or
// healthy.
func (d *Daemon) loadState(dir string, reset bool) (map[string]health.Saved, error) {
	f, aside, err := state.Recover(dir, reset, time.Now())
	if err != nil {
		return nil, err
	}
	if aside != nil {
		slog.Warn("starting without saved state (--reset-state): checks start from the pinned table if it is this config's, else healthy, and the event log empty",
			"moved_aside", aside.Path, "error", aside.Err)
	}
	d.events.Restore(f.Events)
	return f.Checks, nil
}

// keepState writes the state file whenever the aggregator's saved state
// changes, at most once per stateGap, until ctx ends.
func (d *Daemon) keepState(ctx context.Context, dir string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.agg.Changed():
		}
		if err := d.saveState(dir); err != nil {
			slog.Warn("saving state: a restart now would start from older state", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(stateGap):
		}
	}
}

func (d *Daemon) saveState(dir string) error {
	return state.Save(dir, state.File{Written: time.Now(), Checks: d.agg.Saved(), Events: d.events.Events()})
}

// backgroundNice is the CPU priority of the aggregation's threads.
const backgroundNice = 10

// background moves the calling goroutine to an OS thread of its own at a
// lower CPU priority, for good: the thread ends with the goroutine. Framing
// and pushing the health table is constant work, milliseconds for a large
// table; at the same priority it would delay the fallback's answers by as
// much whenever both want the CPU (a p99 of 10 ms against 0.3 ms measured
// on one CPU with 65,536 entries). `steadydns serve` gives the process a
// P more than it has CPUs, so the aggregation never holds the last one.
func background() {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice); err != nil {
		slog.Warn("lowering the aggregation's cpu priority", "error", err)
	}
}

// apply makes a plan current: the aggregator learns the new indexes and
// pushes the table before any record that refers to them enters the maps.
func (d *Daemon) apply(p *Plan) error {
	if d.agg != nil {
		d.agg.Reconfigure(p.Config, p.Index)
	}
	if d.sched != nil {
		probes := p.Probes()
		if d.fleet != nil {
			// A prober runs its own cell's checks; one process runs them all.
			for id := range probes {
				if k, _ := p.Config.Checks.Find(id); p.Config.Checks.Cell(k) != d.fleet.cell {
					delete(probes, id)
				}
			}
		}
		if err := d.sched.Update(probes); err != nil {
			return err
		}
		if err := d.framer.Configure(p.Config.Hash, probes); err != nil {
			return err
		}
	}
	// In a fleet the table comes from an aggregator, which may be
	// another host: a record may briefly point at an index whose entry is
	// the previous config's, and the hash check makes the edge wait for
	// tables of the new config.
	if d.agg != nil && d.fleet == nil {
		if err := d.agg.Push(time.Now()); err != nil {
			return err
		}
	}
	if d.fleet != nil && d.fleet.merge != nil {
		d.fleet.merge.Configure(p.Config.CellNames(), p.entryCells())
	}
	if d.objs != nil {
		if err := d.applyEdge(p); err != nil {
			return err
		}
	}
	d.plan.Store(p)
	return nil
}

// applyEdge writes the records, geo and zone SOAs into the maps.
func (d *Daemon) applyEdge(p *Plan) error {
	v4, v6 := p.Geo.Entries()
	if err := d.objs.SyncGeo(v4, v6, p.Geo.Orders()); err != nil {
		return err
	}
	for i, z := range p.Zones {
		if i >= d.objs.MaxZones() {
			slog.Warn("more zones than the data plane holds SOAs for: their NODATA goes to the fallback", "zone", z.Origin())
			break
		}
		soa, ok := records.SOA(z)
		if !ok {
			slog.Warn("SOA too long for the data plane: NODATA goes to the fallback", "zone", z.Origin())
		}
		if err := d.objs.PutZoneSOA(i, &soa); err != nil {
			return err
		}
	}
	return d.objs.SyncRecords(p.Compiled.Entries())
}

func (d *Daemon) view(p *Plan) *fallback.View {
	return &fallback.View{Zones: zone.NewZones(p.Zones...), Records: records.NewAnswerer(p.Compiled, d.table, p.Geo)}
}

// Version is the build's version, "steadydns (devel)" and the commit it
// was built from when known: what `steadydns version` prints and
// version.server answers.
func Version() string {
	v := "steadydns (devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v += " " + s.Value
			}
		}
	}
	return v
}

// Reload rereads the config. A config that does not load, or that changes
// what only a restart can change, is rejected and the running one stays.
func (d *Daemon) Reload() error {
	err := d.reload()
	d.metrics.ObserveReload(err)
	return err
}

func (d *Daemon) reload() error {
	cfg, err := config.Load(d.path)
	if err != nil {
		return err
	}
	if cfg.Cluster.Config == config.ConfigNATS {
		if d.fleet == nil || d.fleet.store == nil {
			return cfg.Errorf("cluster.config", "the config source changed: restart to apply it")
		}
		// The local file changed: compose it with the revision in use.
		ctx, cancel := context.WithTimeout(context.Background(), configWait)
		defer cancel()
		rev := d.fleet.revision.Load()
		value, err := d.fleet.store.Revision(ctx, rev)
		if err != nil {
			return fmt.Errorf("reloading: %w", err)
		}
		if cfg, err = d.composeConfig(value, rev); err != nil {
			return err
		}
		if err := d.reloadWith(cfg); err != nil {
			return err
		}
		d.fleet.revision.Store(rev)
		return nil
	}
	return d.reloadWith(cfg)
}

// reloadWith applies a new config. One that changes what only a restart
// can change is rejected and the running one stays.
func (d *Daemon) reloadWith(cfg *config.Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.plan.Load().Config
	if !reflect.DeepEqual(cur.Server, cfg.Server) {
		return cfg.Errorf("server", "the server section changed: restart to apply it")
	}
	if !reflect.DeepEqual(restartCluster(cur.Cluster), restartCluster(cfg.Cluster)) {
		return cfg.Errorf("cluster", "the cluster section changed: restart to apply it")
	}
	if d.fleet != nil {
		if _, err := d.id.hostCell(cfg); err != nil {
			return err
		}
		self := d.id.hostID()
		if !reflect.DeepEqual(cur.Cluster.NATS.Hosts[self], cfg.Cluster.NATS.Hosts[self]) {
			return cfg.Errorf("cluster.nats.hosts."+self, "this host's own line changed: restart to apply it")
		}
	}
	if cur.Aggregation.TableSize != cfg.Aggregation.TableSize {
		return cfg.Errorf("aggregation.table_size", "the table size changed: restart to apply it")
	}
	p, err := Build(cfg, d.plan.Load().Index)
	if err != nil {
		return err
	}
	if d.fleet != nil && d.fleet.srv != nil && !reflect.DeepEqual(cur.Cluster.NATS.Hosts, cfg.Cluster.NATS.Hosts) {
		// Before the plan: receivers must not take a host the servers
		// still refuse, nor the servers let in one receivers drop.
		if err := d.fleet.srv.SetHosts(transportHosts(cfg)); err != nil {
			return cfg.Errorf("cluster.nats.hosts", "%v", err)
		}
	}
	if err := d.apply(p); err != nil {
		return err
	}
	if d.fb != nil {
		d.fb.SetView(d.view(p))
	}
	slog.Info("reloaded", "config", d.path, "records", len(p.Compiled.Sets))
	return nil
}

// restartCluster is what of the cluster section only a restart applies.
// Cells, the expected edges and the limits other than a prober's (which
// sizes its frames) only validate configs and route tables, so a reload
// applies them: a cell is added to every host's file with a SIGHUP. So do
// the other hosts' lines in cluster.nats.hosts, so a stolen key is
// revoked without a restart; the host's own line needs one.
func restartCluster(c config.Cluster) config.Cluster {
	c.Cells, c.Edges = nil, 0
	c.Capacity = config.Capacity{ChecksPerProber: c.Capacity.ChecksPerProber}
	if c.NATS != nil {
		n := *c.NATS
		n.Hosts = nil
		c.NATS = &n
	}
	return c
}

// Run serves until ctx ends or a signal stops the daemon; SIGHUP reloads.
func (d *Daemon) Run(ctx context.Context) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return d.Close()
		case s := <-sig:
			if s != syscall.SIGHUP {
				return d.Close()
			}
			if err := d.Reload(); err != nil {
				slog.Error("reload rejected, the running config stays", "error", err)
			}
		}
	}
}

// Close stops what Start started, in reverse order: the pushes, the API,
// the fallback, the prober. XDP stays attached through its pinned link and
// keeps answering from the pinned maps, so a restart does not interrupt
// it; `steadydns detach` removes it.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.started.undo(false) })
	return d.closeErr
}

// XDPOutcomes implements api.Source.
func (d *Daemon) XDPOutcomes() (map[string]uint64, error) {
	if d.objs == nil {
		return nil, nil // not an edge: no data plane
	}
	counts, err := d.objs.Outcomes()
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(counts))
	for i, n := range counts {
		out[d.outcomes[i]] = n
	}
	return out, nil
}

// Aggregator implements api.Source.
func (d *Daemon) Aggregator() *health.Aggregator { return d.agg }

// Table implements api.Source.
func (d *Daemon) Table() *edge.Table { return d.table }

// Events implements api.State.
func (d *Daemon) Events() *health.EventLog { return &d.events }

// Records implements api.State.
func (d *Daemon) Records() *records.Compiled { return d.plan.Load().Compiled }

// Metrics is the daemon's collector.
func (d *Daemon) Metrics() *api.Metrics { return d.metrics }

// Statuses implements api.Source: the aggregator's view of the checks it
// aggregates, and for the others, on an edge, each check's entry in the
// merged table, from the aggregator followed in the check's cell.
func (d *Daemon) Statuses() []health.Status {
	var agg []health.Status
	if d.agg != nil {
		agg = d.agg.Statuses()
		if d.fleet == nil {
			return agg
		}
	}
	p := d.plan.Load()
	var out []health.Status
	for _, s := range agg {
		// Another cell's checks get no frames here: their entries say
		// nothing.
		if k, _ := p.Config.Checks.Find(s.ID); p.Config.Checks.Cell(k) == d.fleet.cell {
			out = append(out, s)
		}
	}
	if d.table == nil {
		return out
	}
	cold := d.table.Meta().Cold
	following := d.fleet.merge.Following()
	checks := &p.Config.Checks
	for k := range checks.Len() {
		c := checks.Check(k)
		if d.agg != nil && c.Cell == d.fleet.cell {
			continue
		}
		i := p.Index.EntryOf(k)
		s := health.Status{ID: c.ID, Type: string(c.Type), Index: i, Up: d.table.Up(i)}
		switch agg := following[c.Cell]; {
		case cold:
			s.Up, s.Reason = true, "cold start: no table yet, every candidate is answered"
		case agg == "":
			s.Up, s.Reason = true, "no table of cell "+c.Cell+" yet: the check fails open"
		default:
			s.Reason = "from the table of " + agg
		}
		out = append(out, s)
	}
	return out
}

// Ready implements api.State. An edge is ready when the fallback listens,
// XDP is attached to every configured interface, and a health table has
// been written: before the first table an edge fails open, answering every
// candidate, which it does to keep answering but should not be announced
// for. A host without the edge role is ready once started.
func (d *Daemon) Ready() error {
	if d.table == nil {
		return nil
	}
	var missing []string
	if d.fb == nil || len(d.fb.Addrs()) == 0 {
		missing = append(missing, "the fallback is not listening")
	}
	for _, ifname := range d.plan.Load().Config.Server.Interfaces {
		if !d.objs.LinkedTo(ifname, d.ifindex[ifname]) {
			missing = append(missing, "xdp is not attached to "+ifname)
		}
	}
	if d.table.Meta().Cold {
		missing = append(missing, "no health table yet: every candidate is answered (cold start, failing open)")
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// Fleet implements api.Source.
func (d *Daemon) Fleet() api.FleetView {
	p := d.plan.Load()
	v := api.FleetView{ID: d.id.hostID(), Region: d.id.Region, ConfigHash: fmt.Sprintf("%016x", p.Config.Hash), ConfigSource: p.Config.Cluster.Config}
	for _, r := range config.Roles {
		if d.id.has(r) {
			v.Roles = append(v.Roles, string(r))
		}
	}
	f := d.fleet
	if f == nil {
		return v
	}
	v.Revision, v.Refused = f.revision.Load(), f.refused.Load()
	if d.sched != nil || d.agg != nil {
		v.Cell = f.cell
	}
	if f.merge != nil {
		v.FollowingCells, v.Switches = f.merge.Following(), f.merge.Switches()
		v.Following = v.FollowingCells[p.Config.Cluster.Cells[0].Name]
	}
	v.Capacity = d.capacity(p)
	v.PermissionErrors = f.conn.Counters().PermissionErrors
	v.Messages = map[string]map[string]uint64{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for kind, sub := range f.subs {
		c := sub.Counters()
		v.Messages[kind.String()] = map[string]uint64{"delivered": c.Delivered, "missing": c.Missing, "corrupt": c.Corrupt,
			"malformed": c.Malformed, "wrong_kind": c.WrongKind, "wrong_sender": c.WrongSender, "other_config": c.Rejected,
			"late": c.Late, "duplicate": c.Duplicate, "dropped": c.Dropped, "unknown_sender": c.Unknown,
			"wrong_length": c.WrongLength, "future_slot": c.Future}
	}
	if d.agg != nil && v.Messages["frame"] != nil {
		v.Messages["frame"]["future_seq"] = d.agg.Counters().Future
	}
	if f.srv != nil {
		r := f.srv.Refused()
		v.NATSRefused = map[string]uint64{"publish": r.Publish, "subscribe": r.Subscribe, "client": r.Clients, "route": r.Routes}
	}
	return v
}
