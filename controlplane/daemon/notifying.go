package daemon

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/notify"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// notifying carries the host's events. Where it aggregates, it completes
// each change the aggregator judges (id, records, host, cell) and hands
// it to the webhooks and, in a fleet, to its events subject. On a fleet's
// edge it keeps in the host's log the changes the aggregators it follows
// publish.
type notifying struct {
	host  string
	log   *health.EventLog
	fleet *fleetNode       // nil on a single host
	edge  *edgeServer      // a fleet's edge, or nil
	agg   *aggregation     // nil unless this host aggregates
	n     *notify.Notifier // nil unless this host aggregates

	plan  atomic.Pointer[notifyPlan]
	heard heardLog
	subs  []*transport.EventSubscription
}

// notifyPlan is what the events need of a plan.
type notifyPlan struct {
	cfg     *config.Config
	records map[string][]string // check id → names of the record sets it feeds
	// rank is this aggregator's place among its cell's, by id: the one
	// ranked first posts to the webhooks at once, each after it waits a
	// holdoff more and posts only what none before it published.
	rank    int
	ranks   map[string]int
	holdoff time.Duration
}

// webhookHoldoff is how many push periods each aggregator of a cell
// waits after the one ranked before it: time for that one to judge the
// same change, a period or two apart, and publish it.
const webhookHoldoff = 4

// openNotifying makes the events' part of a host: a, where it
// aggregates, judges the changes; e, a fleet's edge, keeps those its
// aggregators publish.
func openNotifying(host string, log *health.EventLog, f *fleetNode, e *edgeServer, a *aggregation, observe func(target, outcome string)) *notifying {
	nt := &notifying{host: host, log: log, fleet: f, agg: a}
	if f != nil {
		nt.edge = e
	}
	if a != nil {
		nt.n = notify.New(observe)
		log.Handle(nt.complete)
	}
	return nt
}

// apply takes the plan's webhooks, records and this aggregator's rank. A
// header file that cannot be read refuses the plan.
func (nt *notifying) apply(p *Plan) error {
	cfg := p.Config
	np := &notifyPlan{cfg: cfg, records: map[string][]string{}}
	for _, s := range p.Compiled.Sets {
		for _, c := range s.Checks() {
			if c != "" && !slices.Contains(np.records[c], s.Name) {
				np.records[c] = append(np.records[c], s.Name)
			}
		}
	}
	if nt.n == nil {
		nt.plan.Store(np)
		return nil
	}
	hooks, err := notify.Webhooks(cfg)
	if err != nil {
		return err
	}
	if nt.fleet != nil {
		np.ranks = map[string]int{}
		for _, id := range cfg.Cluster.NATS.HostsWith(config.RoleAggregator) {
			if hostCellOf(cfg, cfg.Cluster.NATS.Hosts[id]) == nt.fleet.cell {
				np.ranks[id] = len(np.ranks)
			}
		}
		np.rank = np.ranks[nt.host]
		np.holdoff = webhookHoldoff * cfg.Aggregation.PushInterval
		for i := range hooks {
			hooks[i].Delay = time.Duration(np.rank) * np.holdoff
			hooks[i].Skip = nt.published
		}
		hooks = append(hooks, nt.natsTarget())
	}
	nt.plan.Store(np)
	nt.n.Configure(hooks)
	return nil
}

// natsTarget publishes each event on this aggregator's events subject. A
// lost connection comes back within seconds, and an event is news then
// still, so it is retried longer than a webhook by default.
func (nt *notifying) natsTarget() notify.Target {
	return notify.Target{Name: "nats", Timeout: 5 * time.Second, Retries: 10, Backoff: time.Second, MaxBackoff: 10 * time.Second,
		Queue: 1000, Send: func(_ context.Context, body []byte) error { return nt.fleet.conn.PublishEvent(body) }}
}

// complete fills in what the aggregator does not know of a change and
// passes it on; it runs within the push, and Notify does not block.
func (nt *notifying) complete(ev *health.Event) {
	p := nt.plan.Load()
	ev.Host = nt.host
	ev.Records = p.records[ev.Check]
	key := ev.Check
	if k, ok := p.cfg.Checks.Find(ev.Check); ok {
		ev.Cell = p.cfg.Checks.Cell(k)
	}
	if ev.Region != "" {
		// A traffic shift is no check's: it is news of this aggregator's
		// cell, whose subject carries it, named by its region.
		ev.Cell, key = p.cfg.Cluster.Cells[0].Name, ev.Region
		if nt.fleet != nil {
			ev.Cell = nt.fleet.cell
		}
	}
	ev.ID = notify.EventID(key, ev.To, uint64(ev.Time.UnixNano()/int64(p.cfg.Aggregation.PushInterval)))
	nt.n.Notify(*ev)
}

// start subscribes, in a fleet, to the cell's other aggregators' events
// (where this host aggregates) and to those of every cell (on an edge).
func (nt *notifying) start() error {
	if nt.fleet == nil {
		return nil
	}
	if nt.agg != nil {
		s, err := nt.fleet.conn.SubscribeEvents(nt.fleet.cell, nt.peerEvent)
		if err != nil {
			return err
		}
		nt.subs = append(nt.subs, s)
	}
	if nt.edge != nil {
		s, err := nt.fleet.conn.SubscribeEvents(transport.AllCells, nt.edgeEvent)
		if err != nil {
			return err
		}
		nt.subs = append(nt.subs, s)
	}
	return nil
}

// stop ends the subscriptions and the notifier, abandoning what waits.
func (nt *notifying) stop(context.Context, bool) error {
	var errs []error
	for _, s := range nt.subs {
		errs = append(errs, s.Unsubscribe())
	}
	if nt.n != nil {
		nt.n.Close()
	}
	return errors.Join(errs...)
}

func (nt *notifying) close(context.Context) error { return nil }

// receive decodes an event from sender of cell, which must be an
// aggregator of the cell and name itself and the cell in it.
func (nt *notifying) receive(cell, sender string, payload []byte) (health.Event, bool) {
	cfg := nt.plan.Load().cfg
	if !senderAllowed(cfg, transport.KindTable, cell, sender) {
		return health.Event{}, false
	}
	ev, err := notify.Decode(payload)
	if err == nil && (ev.Host != sender || ev.Cell != cell) {
		err = errors.New("the event names another host or cell than its subject")
	}
	if err != nil {
		slog.Warn("event dropped", "from", sender, "cell", cell, "error", err)
		return health.Event{}, false
	}
	return ev, true
}

// edgeEvent keeps an event of the aggregator this edge follows in its
// cell, unless this host aggregates that cell itself and so has it.
func (nt *notifying) edgeEvent(cell, sender string, payload []byte) {
	if nt.agg != nil && nt.fleet.cell == cell {
		return
	}
	if nt.edge.merge.Following()[cell] != sender {
		return
	}
	if ev, ok := nt.receive(cell, sender, payload); ok {
		nt.log.Take(ev)
	}
}

// peerEvent notes an event another aggregator of the cell published.
func (nt *notifying) peerEvent(cell, sender string, payload []byte) {
	if sender == nt.host {
		return
	}
	if ev, ok := nt.receive(cell, sender, payload); ok {
		nt.heard.add(nt.plan.Load().ranks[sender], ev)
	}
}

// published reports whether an aggregator ranked before this one
// published ev's change: the same check and state, judged within a
// holdoff of it.
func (nt *notifying) published(ev *health.Event) bool {
	p := nt.plan.Load()
	return nt.heard.has(p.rank, ev, p.holdoff)
}

// maxHeard bounds the events kept from the other aggregators: a check
// flapping at every push still finds its last changes.
const maxHeard = 1000

// heardLog is the last events the cell's other aggregators published,
// with their rank.
type heardLog struct {
	mu     sync.Mutex
	events []heard
}

type heard struct {
	rank              int
	check, region, to string
	time              time.Time
}

func (h *heardLog) add(rank int, ev health.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == maxHeard {
		h.events = append(h.events[:0], h.events[1:]...)
	}
	h.events = append(h.events, heard{rank, ev.Check, ev.Region, ev.To, ev.Time})
}

// has reports whether an aggregator ranked before rank published ev's
// change within window of ev's time.
func (h *heardLog) has(rank int, ev *health.Event, window time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.events, func(e heard) bool {
		d := e.time.Sub(ev.Time)
		return e.rank < rank && e.check == ev.Check && e.region == ev.Region && e.to == ev.To && d <= window && d >= -window
	})
}
