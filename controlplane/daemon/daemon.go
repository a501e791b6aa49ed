package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
)

// Daemon is a running host: the parts its roles call for, composed.
type Daemon struct {
	path    string
	id      Identity
	metrics *api.Metrics
	events  health.EventLog

	// The parts, nil where this host does not run one.
	fleet *fleetNode // nil on a single host: frames and tables pass in process
	edge  *edgeServer
	agg   *aggregation
	probe *probing
	notes *notifying // where it aggregates, or is a fleet's edge
	api   *apiServer

	opened  []part // in the order opened, for a failed start and Close to close
	started []part // in the order started, to stop

	mu        sync.Mutex // serialises reloads
	plan      atomic.Pointer[Plan]
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

// Start loads the config at path and brings the host up: on an edge,
// records and a first health table into the maps, the fallback listening,
// then XDP attached, so nothing XDP passes goes unanswered.
func Start(path string) (*Daemon, error) { return StartWith(path, Options{}) }

// StartWith is Start with options. A start that fails undoes, in reverse
// order, whatever it had started: nothing keeps running, no socket stays
// bound, and XDP is left as it was.
func StartWith(path string, opts Options) (*Daemon, error) {
	d := &Daemon{path: path, id: opts.Identity}
	d.metrics = api.NewMetrics(d)
	if err := d.start(opts); err != nil {
		if uerr := undo(d.started, d.opened, true); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	return d, nil
}

// configWait bounds how long a host started with cluster.config: nats
// waits for the fleet's NATS servers and a first config revision.
const configWait = 60 * time.Second

// start opens the parts this host's roles call for, each given what the
// ones before it opened; applies the first plan to them; and starts them.
// In a fleet the parts meet over NATS, on a single host in process.
func (d *Daemon) start(opts Options) error {
	cfg, err := d.identify()
	if err != nil {
		return err
	}
	host := d.id.hostID()
	if cfg.Cluster.NATS != nil {
		if d.fleet, err = joinFleet(cfg, d.id, d.id.has(config.RoleAggregator)); err != nil {
			return err
		}
		d.opened = append(d.opened, d.fleet)
		d.fleet.path, d.fleet.plan = d.path, d.plan.Load
		d.fleet.reload, d.fleet.observeReload = d.reloadWith, d.metrics.ObserveReload
	}
	if cfg.Cluster.Config == config.ConfigNATS {
		ctx, cancel := context.WithTimeout(context.Background(), configWait)
		cfg, err = d.fleet.fetchConfig(ctx)
		cancel()
		if err != nil {
			return err
		}
	} else if _, err := MakeKeys(cfg, ""); err != nil {
		return err
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
	if err := d.open(p, opts); err != nil {
		return err
	}
	if err := d.apply(p); err != nil {
		return err
	}
	// The edge answers before anything feeds it, and the API serves
	// before the loops push: stopped the other way round.
	for _, pt := range present(d.edge, d.fleet, d.notes, d.api, d.agg, d.probe) {
		d.started = append(d.started, pt)
		if err := pt.start(); err != nil {
			return err
		}
	}
	slog.Info("serving", "config", d.path, "id", host, "roles", roleList(d.id.Roles), "listen", cfg.Server.Listen,
		"api", d.api.addr.String(), "records", len(p.Compiled.Sets))
	return nil
}

// identify loads the config and completes this host's identity from it.
func (d *Daemon) identify() (*config.Config, error) {
	cfg, err := config.Load(d.path)
	if err != nil {
		return nil, err
	}
	if cfg.Cluster.NATS != nil {
		if d.id, err = fleetIdentity(cfg, d.id); err != nil {
			return nil, err
		}
	}
	if err := transport.ValidSenderID(d.id.hostID()); err != nil {
		return nil, fmt.Errorf("--id: %w", err)
	}
	if cfg.Cluster.NATS == nil && d.id.Roles != nil && len(d.id.Roles) != len(config.Roles) {
		return nil, cfg.Errorf("cluster", "--role %s needs cluster.nats: without it one process plays every role", roleList(d.id.Roles))
	}
	return cfg, nil
}

// open opens the edge, the aggregator and the prober where this host's
// roles call for them, and the API, wiring each to the others or to the
// fleet.
func (d *Daemon) open(p *Plan, opts Options) error {
	cfg, host, f := p.Config, d.id.hostID(), d.fleet
	var seed health.Seed
	if d.id.has(config.RoleEdge) {
		e, err := openEdge(cfg, p.Compiled.Exts(), host, d.metrics, func(name string) []string { return api.DebugTXT(d, name) })
		if err != nil {
			return err
		}
		d.edge, seed = e, e.seed
		d.opened = append(d.opened, e)
		if f != nil {
			e.follow(followTimeout(cfg))
			f.receive(transport.KindTable, transport.AllCells, func(m transport.Message) {
				e.takeTable(m, uint64(d.plan.Load().Config.Aggregation.StaleAfter))
			})
		}
	}
	if d.id.has(config.RoleAggregator) {
		var out health.Sink
		if f != nil {
			out = publisher{f.conn}
		} else {
			out = d.edge.table
		}
		a, err := openAggregation(p, out, seed, &d.events, opts.ResetState)
		if err != nil {
			return err
		}
		d.agg = a
		d.opened = append(d.opened, a)
		a.agg.OnPush(d.metrics.ObservePush)
		if f != nil {
			// Only this cell's probers run this cell's checks.
			a.cell = f.cell
			f.receive(transport.KindFrame, f.cell, func(m transport.Message) { a.ingestFrom(m, d.plan.Load().Config) })
			f.receive(transport.KindState, "", a.applyState)
		} else {
			a.inProcess = true
		}
	}
	if d.id.has(config.RoleProber) {
		var emit func(frame []byte)
		if f != nil {
			emit = func(b []byte) {
				if err := f.publish(transport.KindFrame, d.plan.Load(), b); err != nil {
					slog.Warn("publishing a result frame", "error", err)
				}
			}
		} else {
			emit = d.agg.ingest
		}
		pr, err := openProbing(cfg, host, d.id.Region, opts.Netns, d.observe, emit)
		if err != nil {
			return err
		}
		d.probe = pr
		d.opened = append(d.opened, pr)
		if f != nil {
			// A prober runs its own cell's checks; one process runs them all.
			pr.cell = f.cell
		}
	}
	if d.agg != nil || f != nil && d.edge != nil {
		d.notes = openNotifying(host, &d.events, f, d.edge, d.agg, d.metrics.ObserveNotify)
		d.opened = append(d.opened, d.notes)
	}
	d.api = newAPI(cfg, d, d.metrics)
	return nil
}

// observe takes a probe's result as it comes: into the aggregator in this
// process, and into the metrics.
func (d *Daemon) observe(r prober.Result) {
	if d.agg != nil {
		d.agg.agg.Observe(r)
	}
	// The first results can come before the first plan is stored.
	if p := d.plan.Load(); p != nil {
		if k, ok := p.Config.Checks.Find(r.ID); ok {
			d.metrics.ObserveCheck(string(p.Config.Checks.Type(k)), r)
		}
	}
}

// followTimeout is how long an edge waits for the next table from the
// aggregator it follows before it follows another: three push periods, so
// one late or lost table does not make it switch.
func followTimeout(cfg *config.Config) time.Duration { return 3 * cfg.Aggregation.PushInterval }

// apply makes a plan current in every part: the aggregator learns the new
// indexes and pushes the table before any record that refers to them
// enters the edge's maps. The webhooks go first: a header file that
// cannot be read refuses the plan before any part has taken it.
func (d *Daemon) apply(p *Plan) error {
	for _, pt := range present(d.notes, d.fleet, d.agg, d.probe, d.edge) {
		if err := pt.apply(p); err != nil {
			return err
		}
	}
	d.plan.Store(p)
	return nil
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
		if cfg, err = d.fleet.composeConfig(value, rev); err != nil {
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
	if cfg.Cluster.Config != config.ConfigNATS {
		if _, err := MakeKeys(cfg, ""); err != nil {
			return err
		}
	}
	p, err := Build(cfg, d.plan.Load().Index)
	if err != nil {
		return err
	}
	if d.fleet != nil {
		if err := d.fleet.setHosts(cur, cfg); err != nil {
			return err
		}
	}
	if err := d.apply(p); err != nil {
		return err
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
	roll := time.NewTimer(d.rollZSKs())
	defer roll.Stop()
	for {
		select {
		case <-roll.C:
			roll.Reset(d.rollZSKs())
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

// rollZSKs rolls over the ZSKs past their zone's zsk_lifetime and reloads
// to follow the new keys, on a host with a config of its own: one from the
// bucket never makes keys. It returns when to look again.
func (d *Daemon) rollZSKs() time.Duration {
	cfg := d.plan.Load().Config
	if cfg.Cluster.Config == config.ConfigNATS {
		return rollCheck
	}
	rolled, wait := rollZSKs(cfg, time.Now())
	if len(rolled) > 0 {
		if err := d.Reload(); err != nil {
			slog.Error("reload after a ZSK rollover rejected: the new key waits for the next reload", "error", err)
		}
	}
	return wait
}

// Close stops what Start started, in reverse order: the pushes, the API,
// the fallback, the prober. XDP stays attached through its pinned link and
// keeps answering from the pinned maps, so a restart does not interrupt
// it; `steadydns detach` removes it.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = undo(d.started, d.opened, false) })
	return d.closeErr
}
