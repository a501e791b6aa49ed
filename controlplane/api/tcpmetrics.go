package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadydns/steadydns/controlplane/fallback"
)

// tcpMetrics count the fallback's TCP connections as they come and go.
type tcpMetrics struct {
	open   prometheus.Gauge
	closed *prometheus.CounterVec
}

// tcpClosed labels the events that close a connection by a limit with
// their reason.
var tcpClosed = map[fallback.TCPEvent]string{
	fallback.TCPIdleTimeout: "timeout",
	fallback.TCPEvicted:     "evicted",
	fallback.TCPEvictedBusy: "busy",
	fallback.TCPLifetime:    "lifetime",
	fallback.TCPQueryLimit:  "queries",
	// Not a limit: the client did not complete its TLS handshake.
	fallback.TCPHandshakeFailed: "tls",
}

func newTCPMetrics() tcpMetrics {
	t := tcpMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "steadydns_tcp_connections",
			Help: "TCP connections to the fallback open now, DNS over TLS's included."}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "steadydns_tcp_connections_closed_total",
			Help: "TCP connections, DNS over TLS's included, the fallback closed by a server.tcp limit: idle for idle_timeout (timeout); answered the least recently, to admit a new one past a limit, while idle (evicted) or reading a query or writing a reply (busy); past max_lifetime (lifetime); after max_pipelined replies (queries); or whose TLS handshake failed (tls)."}, []string{"reason"}),
	}
	// Every reason shows from the start, at zero.
	for _, reason := range tcpClosed {
		t.closed.WithLabelValues(reason)
	}
	return t
}

func (t tcpMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.open, t.closed}
}

// ObserveTCP counts one TCP connection event; it is
// fallback.Options.OnTCP.
func (m *Metrics) ObserveTCP(e fallback.TCPEvent) {
	switch e {
	case fallback.TCPOpened:
		m.tcp.open.Inc()
	case fallback.TCPClosed:
		m.tcp.open.Dec()
	default:
		m.tcp.closed.WithLabelValues(tcpClosed[e]).Inc()
	}
}
