package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// Shift shifts region's answers away for dur, or with dur 0 cancels its
// shift; who is the API's client. In a fleet the change goes to every
// aggregator, this one included, which name this host as its sender.
func (d *Daemon) Shift(region string, dur time.Duration, reason, who string) error {
	s, err := shiftChange(d.plan.Load().Config, region, dur, reason)
	if err != nil {
		return err
	}
	if d.fleet == nil {
		return d.agg.applyShift(s, who)
	}
	if err := d.takesState(); err != nil {
		return fmt.Errorf("%s: %w", shifting(s), err)
	}
	b, err := s.Encode()
	if err != nil {
		return fmt.Errorf("%s: %w", shifting(s), err)
	}
	return d.fleet.publish(transport.KindState, d.plan.Load(), b)
}

// Shifts lists the shifts in force, as this host's aggregator has them.
func (d *Daemon) Shifts() ([]health.Shift, error) {
	if d.agg == nil {
		return nil, fmt.Errorf("listing shifts: %w", d.takesState())
	}
	return d.agg.agg.Shifts(time.Now()), nil
}

// shiftChange is the state change that shifts region away for dur, or
// cancels its shift when dur is 0, checked against cfg: the region must
// be one of server.geo's, the duration and reason within bounds.
func shiftChange(cfg *config.Config, region string, dur time.Duration, reason string) (transport.StateChange, error) {
	s := transport.StateChange{Kind: transport.StateShift, Check: region}
	if dur != 0 {
		s.Value, s.Reason, s.Duration = 1, reason, dur
	}
	if cfg.Server.Geo.RegionID(region) == 0 {
		return s, fmt.Errorf("%s: %w", shifting(s), health.ErrUnknownRegion)
	}
	if dur == 0 {
		return s, nil
	}
	if err := health.CheckShift(dur, reason); err != nil {
		return s, fmt.Errorf("%s: %w", shifting(s), err)
	}
	if len(region)+len(reason) > transport.MaxShiftText {
		return s, fmt.Errorf("%s: the region's name and the reason hold %d bytes, at most %d", shifting(s), len(region)+len(reason), transport.MaxShiftText)
	}
	// Milliseconds are what a state message carries.
	s.Duration = dur.Truncate(time.Millisecond)
	return s, nil
}

// shifting says what s does, for its errors.
func shifting(s transport.StateChange) string {
	if s.Value == 0 {
		return "cancelling the shift of " + s.Check
	}
	return "shifting " + s.Check + " away"
}

// SendShift sends a shift of region for dur, or with dur 0 its
// cancelling, to every aggregator with the admin key of id, under the
// fleet config at path, as SendState sends other state changes.
func SendShift(ctx context.Context, path string, id Identity, region string, dur time.Duration, reason string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	s, err := shiftChange(cfg, region, dur, reason)
	if err != nil {
		return err
	}
	return sendState(ctx, cfg, id, s)
}
