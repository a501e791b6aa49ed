package daemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/transport"
)

var adminValues = []string{health.AdminAuto, health.AdminUp, health.AdminDown}

// SetAdmin forces a check up or down, or back to auto. In a fleet the
// change goes to every aggregator, this one included.
func (d *Daemon) SetAdmin(id, value string) error {
	v := slices.Index(adminValues, value)
	switch {
	case v < 0:
		return fmt.Errorf("setting admin state of %s: %q is not auto, up or down", id, value)
	case d.fleet == nil:
		return d.agg.agg.SetAdmin(id, value)
	}
	if err := d.takesState(); err != nil {
		return fmt.Errorf("setting admin state of %s: %w", id, err)
	}
	return d.publishState(transport.StateChange{Kind: transport.StateAdmin, Value: uint8(v), Check: id})
}

// SetExternal reports an external check's state, which holds for its ttl.
func (d *Daemon) SetExternal(id string, up bool) error {
	if d.fleet == nil {
		return d.agg.agg.SetExternal(id, up, time.Now())
	}
	if err := d.takesState(); err != nil {
		return fmt.Errorf("setting external state of %s: %w", id, err)
	}
	p := d.plan.Load()
	if k, ok := p.Config.Checks.Find(id); ok && p.Config.Checks.Type(k) != config.CheckExternal {
		return fmt.Errorf("setting external state of %s: it is a %s check", id, p.Config.Checks.Type(k))
	}
	var v uint8
	if up {
		v = 1
	}
	return d.publishState(transport.StateChange{Kind: transport.StateExternal, Value: v, Check: id})
}

func (d *Daemon) publishState(s transport.StateChange) error {
	p := d.plan.Load()
	if !p.Config.Checks.Has(s.Check) {
		return fmt.Errorf("setting the state of %s: %w", s.Check, health.ErrUnknownCheck)
	}
	b, err := s.Encode()
	if err != nil {
		return err
	}
	return d.fleet.publish(transport.KindState, p, b)
}

// takesState says why this host does not take state changes: only an
// aggregator's API does, besides the operator's key (steadydns state). An
// edge, the most exposed host, has no say over health.
func (d *Daemon) takesState() error {
	if d.agg != nil {
		return nil
	}
	aggs := d.plan.Load().Config.Cluster.NATS.HostsWith(config.RoleAggregator)
	return fmt.Errorf("%w: only aggregators take state changes: send it to the API of %s, or use steadydns state with an admin key",
		api.ErrWrongHost, strings.Join(aggs, ", "))
}
