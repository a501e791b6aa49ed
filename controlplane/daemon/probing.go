package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/history"
	"github.com/steadydns/steadydns/controlplane/state"
	"github.com/steadydns/steadydns/prober"
)

// probing is the prober: the scheduler that runs the checks and the
// framer that sends their results, every push period, as frames.
type probing struct {
	sched  *prober.Scheduler
	framer *prober.Framer
	// cell is the cell whose checks a fleet's prober runs; "" on a single
	// host, which runs them all.
	cell string
	// region is this prober's; it runs only the checks whose regions
	// include it or that name none. A prober with no region runs only the
	// checks that name none: a check that names regions wants its votes
	// from those regions alone.
	region string
	period time.Duration
	emit   func(frame []byte) // to the aggregator in process, or the fleet
	// history keeps the results, written to dir (server.state_dir)
	// every historyGap and at the stop.
	history *history.Store
	dir     string

	stopLoop context.CancelFunc
	loop     sync.WaitGroup
}

// openProbing makes the scheduler and framer of host, in region, whose
// results go to observe and whose frames go to emit.
func openProbing(cfg *config.Config, host, region string, netns prober.Netns, observe func(prober.Result), emit func([]byte)) (*probing, error) {
	framer, err := prober.NewFramer(host, region, cfg.FrameEntries())
	if err != nil {
		return nil, err
	}
	hist := history.New()
	dir := cfg.Server.StateDir
	// The history is for people: one that cannot be read is started
	// over rather than stopping the start.
	if saved, err := state.LoadHistory(dir); err != nil {
		slog.Warn("starting without the check history", "error", err)
	} else {
		hist.Restore(saved)
	}
	sched := prober.NewScheduler(prober.Options{Netns: netns, OnResult: func(r prober.Result) {
		framer.Record(r)
		hist.Add(r.ID, r.Time, r.Healthy, r.Latency)
		observe(r)
	}})
	return &probing{sched: sched, framer: framer, region: region, period: cfg.Aggregation.PushInterval, emit: emit, history: hist, dir: dir}, nil
}

// historyGap is how often the history file is written: losing the last
// minutes of it to a crash costs no answer, and it holds every bucket.
const historyGap = time.Minute

func (pr *probing) saveHistory() error {
	return state.SaveHistory(pr.dir, pr.history.Snapshot(), time.Now())
}

// apply hands the scheduler and the framer the plan's probes.
func (pr *probing) apply(p *Plan) error {
	pr.history.Retain(p.Config.Checks.Has)
	probes := pr.probes(p)
	if err := pr.sched.Update(probes); err != nil {
		return err
	}
	return pr.framer.Configure(p.Config.Hash, probes)
}

// probes is the plan's probes that this prober runs: those of its cell,
// on a fleet, and of its region. The frame keeps an entry for every check,
// so one left out here is padding.
func (pr *probing) probes(p *Plan) map[string]prober.Probe {
	probes := p.Probes()
	checks := &p.Config.Checks
	for id := range probes {
		k, _ := checks.Find(id)
		if pr.cell != "" && checks.Cell(k) != pr.cell || !checks.InRegion(k, pr.region) {
			delete(probes, id)
		}
	}
	return probes
}

// start sends a frame every push period, from a thread of lower priority.
func (pr *probing) start() error {
	ctx, stop := context.WithCancel(context.Background())
	pr.stopLoop = stop
	pr.loop.Add(2)
	go func() {
		defer pr.loop.Done()
		background()
		pr.framer.Run(ctx, pr.period, pr.emit)
	}()
	go func() {
		defer pr.loop.Done()
		t := time.NewTicker(historyGap)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := pr.saveHistory(); err != nil {
				slog.Warn("saving the check history", "error", err)
			}
		}
	}()
	return nil
}

func (pr *probing) stop(context.Context, bool) error {
	pr.stopLoop()
	pr.loop.Wait()
	return pr.saveHistory()
}

func (pr *probing) close(context.Context) error { pr.sched.Close(); return nil }

// checksRun counts the probed checks this prober runs: the capacity of
// its cell it uses.
func (pr *probing) checksRun(p *Plan) int {
	n := 0
	checks := &p.Config.Checks
	for k := range checks.Len() {
		if _, probed := checks.Type(k).Probed(); probed && checks.Cell(k) == pr.cell && checks.InRegion(k, pr.region) {
			n++
		}
	}
	return n
}
