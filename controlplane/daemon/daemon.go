package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"runtime"
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
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/loader"
	"github.com/steadydns/steadydns/prober"
)

// proberID names this host's prober in its frames.
func proberID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "local"
	}
	return h[:min(len(h), prober.MaxProberID)]
}

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
}

// Start loads the config at path and brings the edge up: records and a
// first health table into the maps, the fallback listening, then XDP
// attached, so nothing XDP passes goes unanswered.
func Start(path string) (*Daemon, error) { return StartWith(path, Options{}) }

// StartWith is Start with options. A start that fails undoes, in reverse
// order, whatever it had started: nothing keeps running, no socket stays
// bound, and XDP is left as it was.
func StartWith(path string, opts Options) (*Daemon, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	p, err := Build(cfg, nil)
	if err != nil {
		return nil, err
	}
	for _, w := range p.Compiled.Warnings {
		slog.Warn(w)
	}
	d := &Daemon{path: path}
	if err := d.start(cfg, p, opts); err != nil {
		if uerr := d.started.undo(true); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	return d, nil
}

// start brings the edge up step by step; each step that starts something
// records how to undo it before the next step runs.
func (d *Daemon) start(cfg *config.Config, p *Plan, opts Options) error {
	var err error
	if d.outcomes, err = loader.OutcomeNames(); err != nil {
		return err
	}
	if d.objs, err = loader.Load(loadOptions(cfg)); err != nil {
		return err
	}
	d.started.push(func(context.Context) error { return d.objs.Close() })
	// The pinned table an earlier run pushed, if any: the edge is not cold
	// while it is fresh, and the checks take their first states from it,
	// so a restart does not make every endpoint flap.
	pinned := make([]byte, loader.HealthTableBytes(d.objs.HealthCapacity()))
	meta, err := d.objs.ReadHealth(pinned)
	if err != nil {
		return err
	}
	d.table = edge.New(d.objs, meta)
	var seed health.Seed
	if meta.Version != 0 {
		seed = health.Seed{ConfigHash: meta.ConfigHash, Table: pinned}
	}
	if d.agg, err = health.New(cfg, p.Index, d.table, seed, &d.events); err != nil {
		return err
	}
	// One process is prober, aggregator and edge: the prober's frames go
	// to the aggregator in process, encoded as they would travel.
	if d.framer, err = prober.NewFramer(proberID(), "", cfg.Aggregation.TableSize); err != nil {
		return err
	}
	d.sched = prober.NewScheduler(prober.Options{Netns: opts.Netns, OnResult: func(r prober.Result) {
		d.framer.Record(r)
		d.agg.Observe(r)
	}})
	d.started.push(func(context.Context) error { d.sched.Close(); return nil })
	if err := d.apply(p); err != nil {
		return err
	}
	d.metrics = api.NewMetrics(d)
	d.fb = fallback.New(fallback.Options{Listen: cfg.Server.Listen, Observe: d.metrics.ObserveFallback}, d.view(p))
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
	}
	// A server of another build or capacity may have left its maps: the
	// links now run this program, so nothing uses them.
	if err := d.objs.RemoveStaleLayouts(); err != nil {
		slog.Warn("removing stale maps", "error", err)
	}
	ln, err := net.Listen("tcp", cfg.Server.API)
	if err != nil {
		return fmt.Errorf("listening for the api on %s: %w", cfg.Server.API, err)
	}
	srv := &http.Server{Handler: api.Handler(d, d.metrics), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	d.started.push(srv.Shutdown)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			background()
			d.framer.Run(ctx, cfg.Aggregation.PushInterval, func(b []byte) {
				if err := d.agg.IngestFrame(b, time.Now()); err != nil {
					slog.Warn("result frame rejected", "error", err)
				}
			})
		}()
		background()
		d.agg.Run(ctx)
		wg.Wait()
	}()
	d.started.push(func(context.Context) error { stop(); <-done; return nil })
	slog.Info("serving", "config", d.path, "listen", cfg.Server.Listen, "api", ln.Addr().String(), "records", len(p.Compiled.Sets))
	return nil
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
	d.agg.Reconfigure(p.Config, p.Index)
	probes := p.Probes()
	if err := d.sched.Update(probes); err != nil {
		return err
	}
	if err := d.framer.Configure(p.Config.Hash, probes); err != nil {
		return err
	}
	if err := d.agg.Push(time.Now()); err != nil {
		return err
	}
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
	if err := d.objs.SyncRecords(p.Compiled.Entries()); err != nil {
		return err
	}
	d.plan.Store(p)
	return nil
}

func (d *Daemon) view(p *Plan) *fallback.View {
	return &fallback.View{Zones: zone.NewZones(p.Zones...), Records: records.NewAnswerer(p.Compiled, d.table, p.Geo)}
}

// Reload rereads the config. A config that does not load, or that changes
// what only a restart can change, is rejected and the running one stays.
func (d *Daemon) Reload() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cfg, err := config.Load(d.path)
	if err != nil {
		return err
	}
	cur := d.plan.Load().Config
	if !reflect.DeepEqual(cur.Server, cfg.Server) {
		return cfg.Errorf("server", "the server section changed: restart to apply it")
	}
	if cur.Aggregation.TableSize != cfg.Aggregation.TableSize {
		return cfg.Errorf("aggregation.table_size", "the table size changed: restart to apply it")
	}
	p, err := Build(cfg, d.agg.Index())
	if err != nil {
		return err
	}
	if err := d.apply(p); err != nil {
		return err
	}
	d.fb.SetView(d.view(p))
	slog.Info("reloaded", "config", d.path, "records", len(p.Compiled.Sets))
	return nil
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
