package health

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/steadydns/steadydns/bpf"
)

// Saved is what a check's state is worth keeping across a restart, keyed
// by its id rather than its table entry: a restart may assign entries
// anew (another table size, another reload history), and a check keeps
// what it had whatever entry it gets.
type Saved struct {
	State  bool      // before the admin override: what the checkers, children or API said
	Up     bool      // after it: what the table said
	Reason uint8     // the state's reason code (ReasonName)
	Since  time.Time // the last change of Up
	// Admin is the override set through the API, empty when none was:
	// one from the config file comes from the config file.
	Admin string `json:",omitempty"`
	// External is an external check's last report, kept until it
	// expires.
	External *SavedExternal `json:",omitempty"`
}

// SavedExternal is an external check's report as SetExternal took it.
type SavedExternal struct {
	Up      bool
	Expires time.Time
}

// Saved returns the state of every check worth keeping: the configured
// ones, as of the last push, and those a reload removed or a restart's
// config left out (so that a reload that adds them back does not start
// them healthy), by id.
func (t *Aggregator) Saved() map[string]Saved {
	t.mu.Lock()
	defer t.mu.Unlock()
	checks := t.index.Checks()
	out := make(map[string]Saved, checks.Len()+len(t.known))
	for id, s := range t.known {
		out[id] = s
	}
	for k := range checks.Len() {
		if i := t.index.EntryOf(k); t.states[i].pushed {
			out[checks.ID(k)] = t.saved(i)
		}
	}
	return out
}

// Changed is signalled, without blocking, whenever something Saved
// returns has changed: a transition, an admin override, an external
// report, a reload. A writer of saved state waits on it.
func (t *Aggregator) Changed() <-chan struct{} { return t.changed }

func (t *Aggregator) touch() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// saved is slot i's Saved; t.mu is held.
func (t *Aggregator) saved(i uint32) Saved {
	st := &t.states[i]
	s := Saved{State: st.state, Up: st.up, Reason: st.reason, Since: time.Unix(0, st.since)}
	if st.apiSet {
		s.Admin = st.apiAdmin.String()
	}
	if st.extSet {
		s.External = &SavedExternal{Up: st.extUp, Expires: time.Unix(0, st.extExpires)}
	}
	return s
}

// restore gives slot i a saved state; t.mu is held or t not yet shared.
// The consecutive counts start over: checkers' tracks start from the
// restored state, so a check saved down needs healthy_threshold successes
// to come back, as it would have without the restart.
func (t *Aggregator) restore(i uint32, s Saved) {
	st := &t.states[i]
	st.state, st.up, st.reason, st.seeded = s.State, s.Up, s.Reason, true
	if !s.Since.IsZero() {
		st.since, st.pushed = s.Since.UnixNano(), true
	}
	if a, ok := parseAdmin(s.Admin); ok {
		st.apiAdmin, st.apiSet = a, true
		t.cfgs[i].admin = a
	}
	if s.External != nil && t.cfgs[i].kind == kindExternal {
		st.extUp, st.extSet, st.extExpires = s.External.Up, true, s.External.Expires.UnixNano()
	}
	for _, tr := range t.trackList {
		tr.up[i] = st.state
	}
}

// forget keeps the state of a check leaving slot i; Reconfigure bounds
// them.
func (t *Aggregator) forget(id string, i uint32) {
	if !t.states[i].pushed {
		return
	}
	// Kept beyond its config, which id is a part of.
	t.known[strings.Clone(id)] = t.saved(i)
}

// restoreAdmin gives slot i the admin override its entry in a pinned table
// shows, by its reason, and reports whether the entry was forced. The
// table was computed under the running config, so an override other than
// the config's was set through the API; one equal to it is taken as the
// config's unless saved state said the API had set it.
func (t *Aggregator) restoreAdmin(i uint32, configured admin, reason uint8) (forced bool) {
	shown := adminAuto
	switch bpf.SteadydnsHealthReason(reason) {
	case bpf.SteadydnsHealthReasonREASON_ADMIN_UP:
		shown = adminUp
	case bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN:
		shown = adminDown
	}
	if st := &t.states[i]; shown != configured || st.apiSet {
		st.apiAdmin, st.apiSet = shown, true
		t.cfgs[i].admin = shown
	}
	return shown != adminAuto
}

// trimKnown bounds the states kept for checks not configured to the
// table's capacity: the most recently changed stay.
func (t *Aggregator) trimKnown() {
	if len(t.known) <= len(t.states) {
		return
	}
	ids := slices.Collect(maps.Keys(t.known))
	slices.SortFunc(ids, func(a, b string) int { return t.known[b].Since.Compare(t.known[a].Since) })
	for _, id := range ids[len(t.states):] {
		delete(t.known, id)
	}
}
