package api

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// tapMetrics are the dnstap logger's counters, read at scrape time.
type tapMetrics struct {
	counters atomic.Pointer[func() (sent, dropped uint64)]
	desc     *prometheus.Desc
}

func newTapMetrics() tapMetrics {
	return tapMetrics{desc: prometheus.NewDesc("steadydns_dnstap_queries_total",
		"Queries the fallback answered, by what became of their dnstap messages (server.dnstap): sent to the output, or dropped for a full queue.",
		[]string{"outcome"}, nil)}
}

// ObserveDnstap makes the metrics read the dnstap logger's counters.
func (m *Metrics) ObserveDnstap(counters func() (sent, dropped uint64)) {
	m.tap.counters.Store(&counters)
}

func (t *tapMetrics) collect(ch chan<- prometheus.Metric) {
	fn := t.counters.Load()
	if fn == nil {
		return
	}
	sent, dropped := (*fn)()
	ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(sent), "sent")
	ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(dropped), "dropped")
}
