package daemon

import (
	"fmt"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/history"
	"github.com/steadydns/steadydns/controlplane/records"
)

// The daemon is the API's api.Source and api.State: it answers from the
// parts this host runs.

// XDPOutcomes implements api.Source.
func (d *Daemon) XDPOutcomes() (map[string]uint64, error) {
	if d.edge == nil {
		return nil, nil // not an edge: no data plane
	}
	return d.edge.xdpOutcomes()
}

// Aggregator implements api.Source.
func (d *Daemon) Aggregator() *health.Aggregator {
	if d.agg == nil {
		return nil
	}
	return d.agg.agg
}

// Table implements api.Source.
func (d *Daemon) Table() *edge.Table {
	if d.edge == nil {
		return nil
	}
	return d.edge.table
}

// Events implements api.State.
func (d *Daemon) Events() *health.EventLog { return &d.events }

// Records implements api.State.
func (d *Daemon) Records() *records.Compiled { return d.plan.Load().Compiled }

// Metrics is the daemon's collector.
func (d *Daemon) Metrics() *api.Metrics { return d.metrics }

// Statuses implements api.Source: the aggregator's view of the checks it
// aggregates, and for the others, on a fleet's edge, each check's entry in
// the merged table, from the aggregator followed in the check's cell.
func (d *Daemon) Statuses() []health.Status {
	p := d.plan.Load()
	var out []health.Status
	skip := ""
	if d.agg != nil {
		out, skip = d.agg.statuses(p), d.agg.cell
	}
	if d.edge != nil && d.edge.merge != nil {
		out = append(out, d.edge.statuses(p, skip)...)
	}
	return out
}

// Ready implements api.State: an edge is ready once it serves as
// configured (edgeServer.ready); a host without the edge role once
// started.
func (d *Daemon) Ready() error {
	if d.edge == nil {
		return nil
	}
	return d.edge.ready()
}

// Fleet implements api.Source.
func (d *Daemon) Fleet() api.FleetView {
	p := d.plan.Load()
	v := api.FleetView{ID: d.id.hostID(), Region: d.id.Region, ConfigHash: fmt.Sprintf("%016x", p.Config.Hash), ConfigSource: p.Config.Cluster.Config,
		PushSeconds: p.Config.Aggregation.PushInterval.Seconds()}
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
	if d.probe != nil || d.agg != nil {
		v.Cell = f.cell
	}
	if d.edge != nil {
		v.FollowingCells, v.Switches = d.edge.merge.Following(), d.edge.merge.Switches()
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
		v.Messages["frame"]["future_seq"] = d.agg.agg.Counters().Future
	}
	if f.srv != nil {
		r := f.srv.Refused()
		v.NATSRefused = map[string]uint64{"publish": r.Publish, "subscribe": r.Subscribe, "client": r.Clients, "route": r.Routes}
	}
	return v
}

// History implements api.State: the results of this host's prober.
func (d *Daemon) History() *history.Store {
	if d.probe == nil {
		return nil
	}
	return d.probe.history
}
