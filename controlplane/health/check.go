package health

import (
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/prober"
)

// Status is one check's state for the API.
type Status struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Index    uint32         `json:"index"`
	Up       bool           `json:"healthy"`
	Reason   string         `json:"reason"`
	Admin    string         `json:"admin"`
	Since    time.Time      `json:"since"`
	Checkers int            `json:"checkers_reporting"`
	Healthy  int            `json:"checkers_healthy"`
	Results  []ResultStatus `json:"last_results,omitempty"`
}

// ResultStatus is one recent probe result.
type ResultStatus struct {
	Time      time.Time `json:"time"`
	Healthy   bool      `json:"healthy"`
	Reason    string    `json:"reason"`
	Detail    string    `json:"detail,omitempty"`
	LatencyMs float64   `json:"latency_ms"`
}

// Event is a transition of a check's state: the health-check log.
type Event struct {
	Time   time.Time `json:"time"`
	Check  string    `json:"check"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
}

// perChecker is what one checker said about one check.
type perChecker struct {
	seq      uint64
	seen     time.Time
	okRun    int
	failRun  int
	up       bool // after the consecutive thresholds
	reason   uint8
	reported bool
}

type check struct {
	cfg    *config.Check
	index  uint32
	admin  string
	per    map[string]*perChecker // by checker (prober id)
	recent []prober.Result

	state   bool // before the admin override: from checkers, children or the API
	up      bool // after it: what the table says
	reason  uint8
	since   time.Time
	pushed  bool
	seeded  bool // state taken from the pinned table
	fresh   int  // checkers that reported recently, at the last evaluation
	healthy int  // of those, the ones that say healthy

	external    bool
	externalSet bool
	expires     time.Time
}

// A new check starts healthy, as Route 53's do, so that adding one does
// not take endpoints out before its first results arrive.
func newCheck(c *config.Check, index uint32) *check {
	return &check{cfg: c, index: index, admin: c.Admin, per: map[string]*perChecker{}, state: true, up: true,
		reason: uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS)}
}

func (c *check) inherit(o *check) {
	c.state, c.up, c.reason, c.since, c.pushed, c.seeded = o.state, o.up, o.reason, o.since, o.pushed, o.seeded
	c.recent, c.external, c.externalSet, c.expires = o.recent, o.external, o.externalSet, o.expires
	if o.admin != o.cfg.Admin {
		c.admin = o.admin // set through the API
	}
	if sameProbe(c.cfg, o.cfg) {
		c.per = o.per
	}
}

// sameProbe reports whether two configs of a check probe the same thing,
// so the thresholds' progress carries over a reload.
func sameProbe(a, b *config.Check) bool {
	return a.Type == b.Type && a.Target == b.Target && a.Port == b.Port && a.Path == b.Path && a.Invert == b.Invert
}

// ingest applies one checker's result: invert, then the consecutive
// thresholds. A result seen before (same or older seq) is ignored, so a
// frame period shorter than the check interval never counts one twice.
func (c *check) ingest(checker string, e *prober.Entry, now time.Time) {
	p := c.per[checker]
	if p == nil {
		p = &perChecker{up: c.state}
		c.per[checker] = p
	}
	if e.Seq <= p.seq {
		p.seen = now
		return
	}
	p.seq, p.seen, p.reported, p.reason = e.Seq, now, true, uint8(e.Reason)
	ok := e.Healthy != c.cfg.Invert
	if ok {
		p.okRun, p.failRun = p.okRun+1, 0
		if !p.up && p.okRun >= c.cfg.HealthyThreshold {
			p.up = true
		}
	} else {
		p.failRun, p.okRun = p.failRun+1, 0
		if p.up && p.failRun >= c.cfg.UnhealthyThreshold {
			p.up = false
		}
	}
}

func (c *check) remember(r prober.Result) {
	if len(c.recent) == maxResults {
		copy(c.recent, c.recent[1:])
		c.recent = c.recent[:maxResults-1]
	}
	c.recent = append(c.recent, r)
}

// evaluate decides the check's state from its checkers (quorum and
// hysteresis), its children or its external report, then the admin
// override. states holds the checks evaluated before it.
func (c *check) evaluate(now time.Time, agg config.Aggregation, all map[string]*check, states map[string]bool) {
	switch c.cfg.Type {
	case "calculated":
		n := 0
		for _, id := range c.cfg.Children {
			if states[id] {
				n++
			}
		}
		c.state, c.reason = n >= c.cfg.MinHealthy, uint8(bpf.SteadydnsHealthReasonREASON_CALCULATED)
	case "external":
		switch {
		case !c.externalSet:
			c.state, c.reason = false, uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS)
		case now.After(c.expires):
			c.state, c.reason = false, uint8(bpf.SteadydnsHealthReasonREASON_EXPIRED)
		default:
			c.state, c.reason = c.external, uint8(bpf.SteadydnsHealthReasonREASON_EXTERNAL)
		}
	default:
		c.quorum(now, agg)
	}
	c.up = c.state
	switch c.admin {
	case AdminUp:
		c.up, c.reason = true, uint8(bpf.SteadydnsHealthReasonREASON_ADMIN_UP)
	case AdminDown:
		c.up, c.reason = false, uint8(bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN)
	}
}

// quorum counts the checkers heard from within three intervals: during a
// partition a location judges by the checkers it can still hear. Healthy
// when more than the quorum share say so (Route 53: 18%), or with
// hysteresis, down below Down and up again at Up.
func (c *check) quorum(now time.Time, agg config.Aggregation) {
	window := 3*c.cfg.Interval + agg.PushInterval
	c.fresh, c.healthy = 0, 0
	var reason uint8
	for _, p := range c.per {
		if !p.reported || now.Sub(p.seen) > window {
			continue
		}
		c.fresh++
		if p.up {
			c.healthy++
		}
		// The reason shown is a failing checker's while any fails.
		if reason == 0 || !p.up {
			reason = p.reason
		}
	}
	if c.fresh == 0 {
		if !c.seeded {
			c.reason = uint8(bpf.SteadydnsHealthReasonREASON_NO_RESULTS)
		}
		return // nobody to hear from: keep the last state
	}
	share := float64(c.healthy) / float64(c.fresh)
	switch h := agg.Hysteresis; {
	case h == nil:
		c.state = share > agg.Quorum
	case c.state:
		c.state = share >= h.Down
	default:
		c.state = share >= h.Up
	}
	c.reason = reason
}

func (c *check) status(id string) Status {
	s := Status{ID: id, Type: c.cfg.Type, Index: c.index, Up: c.up, Reason: ReasonName(c.reason), Admin: c.admin, Since: c.since, Checkers: c.fresh, Healthy: c.healthy}
	for i := len(c.recent) - 1; i >= 0; i-- {
		r := c.recent[i]
		s.Results = append(s.Results, ResultStatus{Time: r.Time, Healthy: r.Healthy, Reason: r.Reason.String(), Detail: r.Detail, LatencyMs: float64(r.Latency.Microseconds()) / 1000})
	}
	return s
}

// detail is the last result's text, for events.
func (c *check) detail() string {
	if len(c.recent) == 0 {
		return ""
	}
	return c.recent[len(c.recent)-1].Detail
}

func stateName(up bool) string {
	if up {
		return "healthy"
	}
	return "unhealthy"
}

// ReasonName is a reason code's label: the prober's ("timeout",
// "status"…) below 0x80, the aggregator's above.
func ReasonName(r uint8) string {
	switch bpf.SteadydnsHealthReason(r) {
	case bpf.SteadydnsHealthReasonREASON_STATIC:
		return "static"
	case bpf.SteadydnsHealthReasonREASON_ADMIN_UP:
		return "admin_up"
	case bpf.SteadydnsHealthReasonREASON_ADMIN_DOWN:
		return "admin_down"
	case bpf.SteadydnsHealthReasonREASON_CALCULATED:
		return "calculated"
	case bpf.SteadydnsHealthReasonREASON_EXTERNAL:
		return "external"
	case bpf.SteadydnsHealthReasonREASON_EXPIRED:
		return "external_expired"
	case bpf.SteadydnsHealthReasonREASON_NO_RESULTS:
		return "no_results"
	}
	return prober.Reason(r).String()
}

// evalOrder lists checks so that every calculated check comes after its
// children; the config has no cycles.
func evalOrder(cfg *config.Config) []string {
	var out []string
	done := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		if done[id] {
			return
		}
		done[id] = true
		for _, ch := range cfg.HealthChecks[id].Children {
			visit(ch)
		}
		out = append(out, id)
	}
	for _, id := range cfg.CheckIDs {
		visit(id)
	}
	return out
}
