package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadydns/steadydns/controlplane/fallback"
)

// tcpMetrics count the fallback's TCP connections as they come and go.
type tcpMetrics struct {
	open       prometheus.Gauge
	refused    prometheus.Counter
	closedIdle *prometheus.CounterVec
}

func newTCPMetrics() tcpMetrics {
	t := tcpMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "steadydns_tcp_connections",
			Help: "TCP connections to the fallback open now."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "steadydns_tcp_connections_refused_total",
			Help: "TCP connections closed as accepted: server.tcp's limit (in all or of the client's prefix) was reached and no connection was idle."}),
		closedIdle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "steadydns_tcp_connections_closed_idle_total",
			Help: "Idle TCP connections the fallback closed: after server.tcp.idle_timeout (timeout), or the longest idle to admit a new one past a limit (evicted)."}, []string{"reason"}),
	}
	// Both reasons show from the start, at zero.
	t.closedIdle.WithLabelValues("timeout")
	t.closedIdle.WithLabelValues("evicted")
	return t
}

func (t tcpMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.open, t.refused, t.closedIdle}
}

// ObserveTCP counts one TCP connection event; it is
// fallback.Options.OnTCP.
func (m *Metrics) ObserveTCP(e fallback.TCPEvent) {
	switch e {
	case fallback.TCPOpened:
		m.tcp.open.Inc()
	case fallback.TCPClosed:
		m.tcp.open.Dec()
	case fallback.TCPRefused:
		m.tcp.refused.Inc()
	case fallback.TCPIdleTimeout:
		m.tcp.closedIdle.WithLabelValues("timeout").Inc()
	case fallback.TCPEvicted:
		m.tcp.closedIdle.WithLabelValues("evicted").Inc()
	}
}
