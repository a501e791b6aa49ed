package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/state"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// aggregation is the aggregator: the checks' states from the probers'
// frames, the table it pushes every period, and the state file that
// keeps the states across restarts.
type aggregation struct {
	agg    *health.Aggregator
	events *health.EventLog
	dir    string // server.state_dir
	// inProcess says the table goes to an edge in this process: apply
	// pushes it at once, before any record refers to the new entries.
	inProcess bool
	// cell is the cell whose checks' frames a fleet's aggregator gets; ""
	// on a single host, which aggregates every check.
	cell     string
	checkers checkers // the checkers heard, for the capacity used

	stopLoops context.CancelFunc
	loops     sync.WaitGroup
}

// openAggregation makes the aggregator of plan p, pushing through out,
// seeded from the state file in server.state_dir and from seed, the
// pinned table. reset starts without a state file that cannot be used.
func openAggregation(p *Plan, out health.Sink, seed health.Seed, events *health.EventLog, reset bool) (*aggregation, error) {
	cfg := p.Config
	a := &aggregation{events: events, dir: cfg.Server.StateDir}
	saved, err := a.loadState(reset)
	if err != nil {
		return nil, fmt.Errorf("server.state_dir %s: %w", a.dir, err)
	}
	seed.Saved, seed.Shifts = saved.Checks, saved.Shifts
	if a.agg, err = health.New(cfg, p.Index, out, seed, events); err != nil {
		return nil, err
	}
	// Written once now, so a state directory that cannot take the file
	// (full, read-only) stops the start instead of every later write
	// failing with only a warning.
	if err := a.saveState(); err != nil {
		return nil, fmt.Errorf("server.state_dir %s: %w", a.dir, err)
	}
	return a, nil
}

// apply hands the aggregator the plan's checks and indexes.
func (a *aggregation) apply(p *Plan) error {
	a.agg.Reconfigure(p.Config, p.Index)
	// In a fleet the table goes to edges elsewhere: a record there may
	// briefly point at an index whose entry is the previous config's, and
	// the hash check makes the edge wait for tables of the new config.
	if a.inProcess {
		return a.agg.Push(time.Now())
	}
	return nil
}

// start runs the pushes, once every push period on a thread of lower
// priority, and the state file's writes.
func (a *aggregation) start() error {
	ctx, stop := context.WithCancel(context.Background())
	a.stopLoops = stop
	a.loops.Add(2)
	go func() {
		defer a.loops.Done()
		background()
		a.agg.Run(ctx)
	}()
	go func() {
		defer a.loops.Done()
		a.keepState(ctx)
	}()
	return nil
}

// stop ends the pushes and writes the state file once more: the last
// state.
func (a *aggregation) stop(context.Context, bool) error {
	a.stopLoops()
	a.loops.Wait()
	return a.saveState()
}

func (a *aggregation) close(context.Context) error { return nil }

// ingest takes a frame from the prober in process.
func (a *aggregation) ingest(frame []byte) {
	if err := a.agg.IngestFrame(frame, time.Now()); err != nil {
		slog.Warn("result frame rejected", "error", err)
	}
}

// ingestFrom takes a frame from a fleet's prober, in the region cfg gives
// it.
func (a *aggregation) ingestFrom(m transport.Message, cfg *config.Config) {
	now := time.Now()
	region := cfg.Cluster.NATS.Hosts[m.Sender].Region
	if err := a.agg.IngestFrameFrom(m.Sender, region, m.Payload, now); err != nil {
		slog.Warn("result frame rejected", "from", m.Sender, "error", err)
		return
	}
	a.checkers.hear(m.Sender, now)
}

// statuses are the states of the checks this aggregator gets frames for:
// another cell's checks get none here, so their entries say nothing.
func (a *aggregation) statuses(p *Plan) []health.Status {
	all := a.agg.Statuses()
	if a.cell == "" {
		return all
	}
	var out []health.Status
	for _, s := range all {
		if k, _ := p.Config.Checks.Find(s.ID); p.Config.Checks.Cell(k) == a.cell {
			out = append(out, s)
		}
	}
	return out
}

// applyState takes a state change from an aggregator or an admin; the
// transport has dropped every other sender's.
func (a *aggregation) applyState(m transport.Message) {
	s, err := transport.DecodeState(m.Payload)
	var what string
	if err == nil {
		switch s.Kind {
		case transport.StateAdmin:
			if int(s.Value) < len(adminValues) {
				what = "admin " + adminValues[s.Value]
				err = a.agg.SetAdmin(s.Check, adminValues[s.Value])
			} else {
				err = fmt.Errorf("admin value %d", s.Value)
			}
		case transport.StateExternal:
			what = "external " + map[bool]string{true: "up", false: "down"}[s.Value == 1]
			err = a.agg.SetExternal(s.Check, s.Value == 1, time.Now())
		case transport.StateShift:
			err = a.applyShift(s, m.Sender)
			what = "shift " + map[bool]string{true: "away for " + s.Duration.String(), false: "cancelled"}[s.Value == 1]
		}
	}
	if err != nil {
		slog.Warn("state change dropped", "from", m.Sender, "error", err)
		return
	}
	slog.Info("state change applied", "from", m.Sender, "check", s.Check, "state", what)
}

// applyShift takes a shift or its cancelling from sender, timed from now.
func (a *aggregation) applyShift(s transport.StateChange, sender string) error {
	now := time.Now()
	if s.Value == 0 {
		return a.agg.Unshift(s.Check, sender, now)
	}
	return a.agg.Shift(health.Shift{Region: s.Check, Reason: s.Reason, Who: sender, Started: now, Expires: now.Add(s.Duration)})
}

// stateGap is the least time between two writes of the state file: a
// table of flapping checks changes every push, and the file holds every
// check.
const stateGap = time.Second

// loadState reads the state file an earlier run wrote and restores its
// health-check log; it returns the file, whose checks' states and shifts
// seed the aggregator. A file that cannot be used is moved aside and stops
// the start, unless reset: starting as if every check were healthy would
// answer with backends known dead or set down. With reset the checks
// start from the pinned table, when there is one of this config, or
// healthy.
func (a *aggregation) loadState(reset bool) (state.File, error) {
	f, aside, err := state.Recover(a.dir, reset, time.Now())
	if err != nil {
		return state.File{}, err
	}
	if aside != nil {
		slog.Warn("starting without saved state (--reset-state): checks start from the pinned table if it is this config's, else healthy, and the event log empty",
			"moved_aside", aside.Path, "error", aside.Err)
	}
	a.events.Restore(f.Events)
	return f, nil
}

// keepState writes the state file whenever the aggregator's saved state
// changes, at most once per stateGap, until ctx ends.
func (a *aggregation) keepState(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.agg.Changed():
		}
		if err := a.saveState(); err != nil {
			slog.Warn("saving state: a restart now would start from older state", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(stateGap):
		}
	}
}

func (a *aggregation) saveState() error {
	now := time.Now()
	return state.Save(a.dir, state.File{Written: now, Checks: a.agg.Saved(), Events: a.events.Events(), Shifts: a.agg.Shifts(now)})
}
