package daemon

import (
	"log/slog"
	"sync"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

// checkers remembers when an aggregator last heard each checker of its
// cell, for the capacity it uses.
type checkers struct {
	mu    sync.Mutex
	heard map[string]time.Time
}

func (c *checkers) hear(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heard == nil {
		c.heard = map[string]time.Time{}
	}
	c.heard[id] = now
}

// count is how many checkers were heard within timeout of now; the others
// are forgotten.
func (c *checkers) count(now time.Time, timeout time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, t := range c.heard {
		if now.Sub(t) > timeout {
			delete(c.heard, id)
		}
	}
	return len(c.heard)
}

// The resources of a cell's capacity, as the metrics name them.
const (
	resourceProberChecks  = "prober_checks"
	resourceCheckerChecks = "aggregator_checker_checks"
	resourceEdges         = "aggregator_edges"
)

// capacity is this host's use of its cell's capacity, per role it plays:
// a prober the checks it runs, an aggregator the checkers it hears times
// the entries of their frames, and an aggregator with an embedded server
// the edges connected to it.
func (d *Daemon) capacity(p *Plan) []api.CapacityView {
	capa := p.Config.Cluster.Capacity
	var out []api.CapacityView
	if d.probe != nil {
		out = append(out, api.CapacityView{Resource: resourceProberChecks, Used: d.probe.checksRun(p), Limit: capa.ChecksPerProber})
	}
	if d.agg != nil {
		n := d.agg.checkers.count(time.Now(), p.Config.Aggregation.CheckerTimeout) * p.Config.FrameEntries()
		out = append(out, api.CapacityView{Resource: resourceCheckerChecks, Used: n, Limit: capa.CheckerChecksPerAggregator})
	}
	if srv := d.fleet.srv; srv != nil {
		var keys []string
		for _, id := range p.Config.Cluster.NATS.HostsWith(config.RoleEdge) {
			keys = append(keys, p.Config.Cluster.NATS.Hosts[id].Key)
		}
		if n, err := srv.ClientsWithKeys(keys); err != nil {
			slog.Warn("counting the edges connected", "error", err)
		} else {
			out = append(out, api.CapacityView{Resource: resourceEdges, Used: n, Limit: capa.EdgesPerAggregator})
		}
	}
	return out
}
