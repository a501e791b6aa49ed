package health

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/steadydns/steadydns/bpf"
)

// Bounds of a traffic shift, as Route 53's zonal shift has them: long
// enough for an incident, never so long that a forgotten shift keeps a
// region out for good. The lower bound lets tests watch one expire.
const (
	MinShift = time.Second
	MaxShift = 72 * time.Hour
	// MaxShiftReason bounds a shift's reason, which travels in a
	// fixed-size state message beside the region's name.
	MaxShiftReason = 64
)

// ErrUnknownRegion is returned for a region not in server.geo.regions.
var ErrUnknownRegion = errors.New("no such region in server.geo.regions")

// ErrNotShifted is returned for cancelling a shift of a region that has
// none.
var ErrNotShifted = errors.New("the region is not shifted")

// Shift is a traffic shift: until it expires every answer of Region
// counts as unhealthy, in every set, so it leaves the answers wherever
// another is healthy; a set with nothing else fails open as usual.
type Shift struct {
	Region  string
	Reason  string
	Who     string // the API client or the host that sent it
	Started time.Time
	Expires time.Time
}

// CheckShift says what is wrong with a shift's duration or reason.
func CheckShift(d time.Duration, reason string) error {
	switch {
	case d < MinShift || d > MaxShift:
		return fmt.Errorf("duration %s is outside %s to %s", d, MinShift, MaxShift)
	case strings.TrimSpace(reason) == "":
		return errors.New("a reason is required: it shows in the events and in status")
	case len(reason) > MaxShiftReason:
		return fmt.Errorf("the reason is %d bytes, at most %d", len(reason), MaxShiftReason)
	case strings.ContainsFunc(reason, unicode.IsControl):
		return errors.New("the reason holds control characters")
	}
	return nil
}

// Shift shifts s.Region away until s.Expires, replacing a shift it has;
// the next push applies it.
func (t *Aggregator) Shift(s Shift) error {
	if err := CheckShift(s.Expires.Sub(s.Started), s.Reason); err != nil {
		return fmt.Errorf("shifting %s away: %w", s.Region, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Contains(t.regions, s.Region) {
		return fmt.Errorf("shifting %s away: %w", s.Region, ErrUnknownRegion)
	}
	// Kept beyond the request or message the strings came from.
	s.Region, s.Reason, s.Who = strings.Clone(s.Region), strings.Clone(s.Reason), strings.Clone(s.Who)
	from := ShiftServing
	if _, ok := t.shifts[s.Region]; ok {
		from = ShiftShifted
	}
	t.shifts[s.Region] = s
	t.log.Add(Event{Time: s.Started, Region: s.Region, From: from, To: ShiftShifted, Reason: ReasonName(uint8(bpf.SteadydnsHealthReasonREASON_SHIFTED)),
		Detail: fmt.Sprintf("%s (by %s, until %s)", s.Reason, s.Who, s.Expires.UTC().Format(time.RFC3339))})
	t.touch()
	return nil
}

// Unshift cancels the shift of region; the next push brings its answers
// back.
func (t *Aggregator) Unshift(region, who string, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.shifts[region]
	switch {
	case !slices.Contains(t.regions, region) && !ok:
		return fmt.Errorf("cancelling the shift of %s: %w", region, ErrUnknownRegion)
	case !ok:
		return fmt.Errorf("cancelling the shift of %s: %w", region, ErrNotShifted)
	}
	delete(t.shifts, region)
	t.log.Add(Event{Time: now, Region: s.Region, From: ShiftShifted, To: ShiftServing, Reason: "cancelled",
		Detail: fmt.Sprintf("by %s; it was %s (by %s)", who, s.Reason, s.Who)})
	t.touch()
	return nil
}

// The states of a region in its events.
const (
	ShiftServing = "serving"
	ShiftShifted = "shifted"
)

// Shifts lists the shifts in force at now, by region.
func (t *Aggregator) Shifts(now time.Time) []Shift {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Shift
	for _, r := range slices.Sorted(maps.Keys(t.shifts)) {
		if s := t.shifts[r]; now.Before(s.Expires) {
			out = append(out, s)
		}
	}
	return out
}

// settleShifts ends the shifts expired at now, each with an event, and
// marks the regions shifted for the derived slots; t.mu is held. It
// reports whether a shift ended.
func (t *Aggregator) settleShifts(now time.Time) bool {
	ended := false
	for _, r := range slices.Sorted(maps.Keys(t.shifts)) {
		if s := t.shifts[r]; !now.Before(s.Expires) {
			delete(t.shifts, r)
			t.log.Add(Event{Time: s.Expires, Region: r, From: ShiftShifted, To: ShiftServing, Reason: "expired",
				Detail: fmt.Sprintf("it was %s (by %s)", s.Reason, s.Who)})
			ended = true
		}
	}
	// Id 0 is no region, which the slots that are not derived read.
	for id := 1; id < len(t.shifted); id++ {
		_, t.shifted[id] = t.shifts[t.regions[id-1]]
	}
	return ended
}
