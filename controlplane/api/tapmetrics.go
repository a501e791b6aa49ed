package api

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// tapMetrics are the dnstap logger's counters, read at scrape time.
type tapMetrics struct {
	counters atomic.Pointer[func() (sent, dropped uint64)]
	samples  atomic.Pointer[func() (sent, queueFull, ringFull uint64)]
	desc     *prometheus.Desc
	sdesc    *prometheus.Desc
}

func newTapMetrics() tapMetrics {
	return tapMetrics{desc: prometheus.NewDesc("steadydns_dnstap_queries_total",
		"Queries the fallback answered, by what became of their dnstap messages (server.dnstap): sent to the output, or dropped for a full queue.",
		[]string{"outcome"}, nil),
		sdesc: prometheus.NewDesc("steadydns_dnstap_xdp_samples_total",
			"Queries XDP answered that were sampled for dnstap (server.dnstap.sample), by what became of them: sent to the output, dropped for a full queue, or for a full ring buffer between XDP and the queue.",
			[]string{"outcome"}, nil)}
}

// ObserveDnstap makes the metrics read the dnstap logger's counters.
func (m *Metrics) ObserveDnstap(counters func() (sent, dropped uint64)) {
	m.tap.counters.Store(&counters)
}

// ObserveDnstapSamples makes the metrics read the counters of XDP's
// samples.
func (m *Metrics) ObserveDnstapSamples(counters func() (sent, queueFull, ringFull uint64)) {
	m.tap.samples.Store(&counters)
}

func (t *tapMetrics) collect(ch chan<- prometheus.Metric) {
	if fn := t.counters.Load(); fn != nil {
		sent, dropped := (*fn)()
		ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(sent), "sent")
		ch <- prometheus.MustNewConstMetric(t.desc, prometheus.CounterValue, float64(dropped), "dropped")
	}
	if fn := t.samples.Load(); fn != nil {
		sent, queue, ring := (*fn)()
		ch <- prometheus.MustNewConstMetric(t.sdesc, prometheus.CounterValue, float64(sent), "sent")
		ch <- prometheus.MustNewConstMetric(t.sdesc, prometheus.CounterValue, float64(queue), "queue_full")
		ch <- prometheus.MustNewConstMetric(t.sdesc, prometheus.CounterValue, float64(ring), "ring_full")
	}
}
