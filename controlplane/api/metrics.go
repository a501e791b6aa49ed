package api

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
)

// Source is what the metrics read at scrape time.
type Source interface {
	// XDPOutcomes returns the summed per-CPU counters, by outcome label.
	XDPOutcomes() (map[string]uint64, error)
	// Aggregator holds the checks' states.
	Aggregator() *health.Aggregator
	// Table is the health table in the data plane.
	Table() *edge.Table
	// Statuses are the checks' states: the aggregator's where this host
	// aggregates, else as the edge's table has them.
	Statuses() []health.Status
	// Fleet is this host's place in a fleet.
	Fleet() FleetView
}

// Metrics collects steadydns_* metrics. The XDP counters are read from the
// per-CPU map at scrape time, so the hot path never touches userspace.
type Metrics struct {
	src      Source
	fallback sync.Map // outcome → *atomic.Uint64

	queries    *prometheus.Desc
	checkUp    *prometheus.Desc
	tableAge   *prometheus.Desc
	tableVer   *prometheus.Desc
	coldStart  *prometheus.Desc
	scrapeErrs atomic.Uint64
	errDesc    *prometheus.Desc
	frames     *prometheus.Desc
	rejected   *prometheus.Desc
	pushCost   *prometheus.Desc
	following  *prometheus.Desc
	capUsed    *prometheus.Desc
	capLimit   *prometheus.Desc
	capRatio   *prometheus.Desc
	switches   *prometheus.Desc
	revision   *prometheus.Desc
	refused    *prometheus.Desc
	messages   *prometheus.Desc
	permErrs   *prometheus.Desc
}

// NewMetrics makes the collector.
func NewMetrics(src Source) *Metrics {
	return &Metrics{
		src:       src,
		queries:   prometheus.NewDesc("steadydns_queries_total", "DNS queries by the path that handled them and their outcome.", []string{"path", "outcome"}, nil),
		checkUp:   prometheus.NewDesc("steadydns_check_healthy", "1 if the check's health-table entry is healthy.", []string{"check"}, nil),
		tableAge:  prometheus.NewDesc("steadydns_health_table_age_seconds", "Time since the health table now in the data plane arrived.", nil, nil),
		tableVer:  prometheus.NewDesc("steadydns_health_table_version", "Version (push slot) of the health table now in the data plane.", nil, nil),
		coldStart: prometheus.NewDesc("steadydns_health_table_cold", "1 while no health table has arrived and records fail open.", nil, nil),
		errDesc:   prometheus.NewDesc("steadydns_metrics_errors_total", "Scrapes that could not read the data-plane counters.", nil, nil),
		frames:    prometheus.NewDesc("steadydns_frames_total", "Result frames the aggregator applied.", nil, nil),
		rejected:  prometheus.NewDesc("steadydns_frames_rejected_total", "Result frames rejected: undecodable or measured under another config hash.", nil, nil),
		pushCost:  prometheus.NewDesc("steadydns_health_push_seconds", "Duration of the last health-table push: evaluating every check and writing the whole table.", nil, nil),
		following: prometheus.NewDesc("steadydns_edge_following", "1 for the aggregator whose tables this edge writes, per cell.", []string{"cell", "aggregator"}, nil),
		capUsed:   prometheus.NewDesc("steadydns_capacity_used", "This host's use of its cell's capacity, by resource: prober_checks, aggregator_checker_checks, aggregator_edges.", []string{"cell", "resource"}, nil),
		capLimit:  prometheus.NewDesc("steadydns_capacity_limit", "The cell's capacity per host, by resource, from cluster.capacity.", []string{"cell", "resource"}, nil),
		capRatio:  prometheus.NewDesc("steadydns_capacity_used_ratio", "steadydns_capacity_used over steadydns_capacity_limit: above 1 the cell is over what was measured.", []string{"cell", "resource"}, nil),
		switches:  prometheus.NewDesc("steadydns_edge_aggregator_switches_total", "Times this edge followed another aggregator because the one it followed went silent.", nil, nil),
		revision:  prometheus.NewDesc("steadydns_config_revision", "Revision of the fleet config in use; 0 for a local file.", nil, nil),
		refused:   prometheus.NewDesc("steadydns_config_revisions_refused_total", "Config revisions from the bucket that failed validation and were not applied.", nil, nil),
		messages:  prometheus.NewDesc("steadydns_fleet_messages_total", "Fleet messages received over NATS, by kind and what became of them (delivered, missing, rejected for another config hash, corrupt…).", []string{"kind", "result"}, nil),
		permErrs:  prometheus.NewDesc("steadydns_fleet_permission_errors_total", "Publishes or subscriptions the NATS servers refused this host.", nil, nil),
	}
}

// ObserveFallback counts one fallback reply; it is fallback.Options.Observe.
func (m *Metrics) ObserveFallback(outcome string) {
	v, ok := m.fallback.Load(outcome)
	if !ok {
		v, _ = m.fallback.LoadOrStore(outcome, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// FallbackCount reads one fallback outcome's count.
func (m *Metrics) FallbackCount(outcome string) uint64 {
	if v, ok := m.fallback.Load(outcome); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.queries, m.checkUp, m.tableAge, m.tableVer, m.coldStart, m.errDesc, m.frames, m.rejected, m.pushCost,
		m.following, m.switches, m.revision, m.refused, m.messages, m.permErrs, m.capUsed, m.capLimit, m.capRatio} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if xdp, err := m.src.XDPOutcomes(); err == nil {
		for outcome, n := range xdp {
			ch <- prometheus.MustNewConstMetric(m.queries, prometheus.CounterValue, float64(n), "xdp", outcome)
		}
	} else {
		m.scrapeErrs.Add(1)
	}
	m.fallback.Range(func(k, v any) bool {
		ch <- prometheus.MustNewConstMetric(m.queries, prometheus.CounterValue, float64(v.(*atomic.Uint64).Load()), "fallback", k.(string))
		return true
	})
	ch <- prometheus.MustNewConstMetric(m.errDesc, prometheus.CounterValue, float64(m.scrapeErrs.Load()))
	for _, s := range m.src.Statuses() {
		v := 0.0
		if s.Up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.checkUp, prometheus.GaugeValue, v, s.ID)
	}
	meta := tableView(m.src)
	cold := 0.0
	if meta.ColdOpen {
		cold = 1
	}
	ch <- prometheus.MustNewConstMetric(m.coldStart, prometheus.GaugeValue, cold)
	ch <- prometheus.MustNewConstMetric(m.tableAge, prometheus.GaugeValue, meta.AgeSec)
	ch <- prometheus.MustNewConstMetric(m.tableVer, prometheus.GaugeValue, float64(meta.Version))
	ch <- prometheus.MustNewConstMetric(m.frames, prometheus.CounterValue, float64(meta.Frames))
	ch <- prometheus.MustNewConstMetric(m.rejected, prometheus.CounterValue, float64(meta.FramesRejected))
	ch <- prometheus.MustNewConstMetric(m.pushCost, prometheus.GaugeValue, meta.PushSeconds)
	f := m.src.Fleet()
	for cell, agg := range f.FollowingCells {
		ch <- prometheus.MustNewConstMetric(m.following, prometheus.GaugeValue, 1, cell, agg)
	}
	for _, c := range f.Capacity {
		ch <- prometheus.MustNewConstMetric(m.capUsed, prometheus.GaugeValue, float64(c.Used), f.Cell, c.Resource)
		ch <- prometheus.MustNewConstMetric(m.capLimit, prometheus.GaugeValue, float64(c.Limit), f.Cell, c.Resource)
		ch <- prometheus.MustNewConstMetric(m.capRatio, prometheus.GaugeValue, float64(c.Used)/float64(c.Limit), f.Cell, c.Resource)
	}
	ch <- prometheus.MustNewConstMetric(m.switches, prometheus.CounterValue, float64(f.Switches))
	ch <- prometheus.MustNewConstMetric(m.revision, prometheus.GaugeValue, float64(f.Revision))
	ch <- prometheus.MustNewConstMetric(m.refused, prometheus.CounterValue, float64(f.Refused))
	ch <- prometheus.MustNewConstMetric(m.permErrs, prometheus.CounterValue, float64(f.PermissionErrors))
	for kind, c := range f.Messages {
		for result, n := range c {
			ch <- prometheus.MustNewConstMetric(m.messages, prometheus.CounterValue, float64(n), kind, result)
		}
	}
}
