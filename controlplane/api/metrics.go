package api

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/prober"
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

// xdpAnswered are the XDP outcomes of queries the kernel handled: replies
// sent from it, and replies the rate limit dropped there. Every other
// outcome is a packet passed to the kernel's stack: the queries among them
// are answered, and counted, by the fallback, so counting them under
// steadydns_queries_total too would count each twice.
var xdpAnswered = map[string]bool{"answered": true, "nodata": true, "servfail": true, rrlSlipped: true, rrlDropped: true}

// The outcomes of replies over the rate limit, on both paths (the XDP
// counters' names and the fallback's outcomes are the same).
const (
	rrlSlipped = "rrl_slipped"
	rrlDropped = "rrl_dropped"
)

// MaxVoteSeries bounds steadydns_check_vote: one series per check and
// checker counted in the quorum is checks × checkers, which a large table
// in a large fleet makes too many for Prometheus. Beyond the bound the
// votes are left out and steadydns_check_vote_series_dropped says how many.
const MaxVoteSeries = 10000

// Latency buckets, in seconds. Checks take from a fraction of a
// millisecond (a TCP connect on a LAN) to their timeout (at most the
// interval, default 2 s); the fallback replies in microseconds; a push
// takes microseconds for a small table and milliseconds for millions of
// entries.
var (
	checkBuckets    = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	fallbackBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1}
	pushBuckets     = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}
)

// Metrics collects steadydns_* metrics. The XDP counters are read from the
// per-CPU map at scrape time, so the hot path never touches userspace.
type Metrics struct {
	src      Source
	fallback sync.Map // outcome → *atomic.Uint64

	checkLatency *prometheus.HistogramVec
	replyLatency prometheus.Histogram
	pushLatency  prometheus.Histogram
	tcp          tcpMetrics
	panics       *prometheus.CounterVec
	notify       *prometheus.CounterVec
	reloads      atomic.Uint64
	reloadErrs   atomic.Uint64
	udp          [len(udpQtypes) + 1]udpBytes // by udpQtypes index; the last is "other"
	tap          tapMetrics

	queries     *prometheus.Desc
	passed      *prometheus.Desc
	checkUp     *prometheus.Desc
	vote        *prometheus.Desc
	votesOver   *prometheus.Desc
	tableAge    *prometheus.Desc
	tableVer    *prometheus.Desc
	coldStart   *prometheus.Desc
	scrapeErrs  atomic.Uint64
	errDesc     *prometheus.Desc
	frames      *prometheus.Desc
	rejected    *prometheus.Desc
	pushCost    *prometheus.Desc
	reloadDesc  *prometheus.Desc
	reloadErrDe *prometheus.Desc
	following   *prometheus.Desc
	switches    *prometheus.Desc
	revision    *prometheus.Desc
	refused     *prometheus.Desc
	messages    *prometheus.Desc
	permErrs    *prometheus.Desc
	natsRefused *prometheus.Desc
	capUsed     *prometheus.Desc
	capLimit    *prometheus.Desc
	capRatio    *prometheus.Desc
	udpIn       *prometheus.Desc
	udpOut      *prometheus.Desc
	rrlLimited  *prometheus.Desc
	rrlSlip     *prometheus.Desc
	rrlDrop     *prometheus.Desc
	shifted     *prometheus.Desc
}

type udpBytes struct{ in, out atomic.Uint64 }

// udpQtypes are the qtypes steadydns_udp_bytes_*_total label by name;
// every other counts as "other", so a flood of random qtypes cannot add
// series. The types an authoritative server answers, and ANY, the one
// amplification attacks favour.
var udpQtypes = [...]uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypeCAA, dns.TypeCNAME, dns.TypeDNSKEY,
	dns.TypeDS, dns.TypeHTTPS, dns.TypeMX, dns.TypeNS, dns.TypeNSEC, dns.TypeNSEC3PARAM, dns.TypePTR,
	dns.TypeRRSIG, dns.TypeSOA, dns.TypeSRV, dns.TypeSVCB, dns.TypeTXT}

// udpIndex maps a qtype to its udpQtypes index, or to "other".
var udpIndex = func() map[uint16]int {
	m := make(map[uint16]int, len(udpQtypes))
	for i, t := range udpQtypes {
		m[t] = i
	}
	return m
}()

// NewMetrics makes the collector.
func NewMetrics(src Source) *Metrics {
	return &Metrics{
		src: src,
		tap: newTapMetrics(),
		checkLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "steadydns_check_duration_seconds",
			Help:    "Time from the start of a health check run by this host's prober to its verdict, failures included, by check type and result reason.",
			Buckets: checkBuckets}, []string{"type", "reason"}),
		replyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "steadydns_fallback_reply_seconds",
			Help:    "Time the fallback took to build a reply, from the parsed query to the reply ready to send; over UDP from the read of the query's batch to the batch's replies ready.",
			Buckets: fallbackBuckets}),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "steadydns_health_push_duration_seconds",
			Help:    "Duration of each health-table push: evaluating every check and writing the whole table.",
			Buckets: pushBuckets}),
		tcp:         newTCPMetrics(),
		panics:      newPanics(),
		notify:      newNotifications(),
		queries:     prometheus.NewDesc("steadydns_queries_total", "DNS queries by the path that answered them and their outcome; each query counts once.", []string{"path", "outcome"}, nil),
		passed:      prometheus.NewDesc("steadydns_xdp_passed_total", "Packets the XDP program passed to the kernel's stack untouched, by why; the queries among them count under steadydns_queries_total{path=\"fallback\"}.", []string{"reason"}, nil),
		checkUp:     prometheus.NewDesc("steadydns_check_healthy", "1 if the check's health-table entry is healthy.", []string{"check"}, nil),
		vote:        prometheus.NewDesc("steadydns_check_vote", "1 if the checker says the check is healthy, 0 if not, after its thresholds; only checkers counted in the quorum at the last push, where this host aggregates.", []string{"check", "checker"}, nil),
		votesOver:   prometheus.NewDesc("steadydns_check_vote_series_dropped", "Votes left out of steadydns_check_vote at this scrape because there were more than its bound of series.", nil, nil),
		tableAge:    prometheus.NewDesc("steadydns_health_table_age_seconds", "Time since the health table now in the data plane arrived.", nil, nil),
		tableVer:    prometheus.NewDesc("steadydns_health_table_version", "Version (push slot) of the health table now in the data plane.", nil, nil),
		coldStart:   prometheus.NewDesc("steadydns_health_table_cold", "1 while no health table has arrived and records fail open.", nil, nil),
		errDesc:     prometheus.NewDesc("steadydns_metrics_errors_total", "Scrapes that could not read the data-plane counters.", nil, nil),
		frames:      prometheus.NewDesc("steadydns_frames_total", "Result frames the aggregator applied.", nil, nil),
		rejected:    prometheus.NewDesc("steadydns_frames_rejected_total", "Result frames rejected: undecodable or measured under another config hash.", nil, nil),
		pushCost:    prometheus.NewDesc("steadydns_health_push_seconds", "Duration of the last health-table push: evaluating every check and writing the whole table.", nil, nil),
		reloadDesc:  prometheus.NewDesc("steadydns_reloads_total", "Config reloads tried: SIGHUP, or a new fleet config revision.", nil, nil),
		reloadErrDe: prometheus.NewDesc("steadydns_reload_errors_total", "Config reloads rejected; the running config stayed.", nil, nil),
		following:   prometheus.NewDesc("steadydns_edge_following", "1 for the aggregator whose tables this edge writes, per cell.", []string{"cell", "aggregator"}, nil),
		switches:    prometheus.NewDesc("steadydns_edge_aggregator_switches_total", "Times this edge followed another aggregator because the one it followed went silent.", nil, nil),
		revision:    prometheus.NewDesc("steadydns_config_revision", "Revision of the fleet config in use; 0 for a local file.", nil, nil),
		refused:     prometheus.NewDesc("steadydns_config_revisions_refused_total", "Config revisions from the bucket that failed validation and were not applied.", nil, nil),
		messages:    prometheus.NewDesc("steadydns_fleet_messages_total", "Fleet messages received over NATS, by kind and what became of them (delivered, missing, rejected for another config hash, corrupt…).", []string{"kind", "result"}, nil),
		natsRefused: prometheus.NewDesc("steadydns_nats_refused_total", "What this aggregator's embedded NATS server refused: publishes and subscriptions a key does not allow, clients without a key of the fleet, routes without an aggregator's signature.", []string{"what"}, nil),
		permErrs:    prometheus.NewDesc("steadydns_fleet_permission_errors_total", "Publishes or subscriptions the NATS servers refused this host.", nil, nil),
		capUsed:     prometheus.NewDesc("steadydns_capacity_used", "This host's use of its cell's capacity, by resource: prober_checks, aggregator_checker_checks, aggregator_edges.", []string{"cell", "resource"}, nil),
		capLimit:    prometheus.NewDesc("steadydns_capacity_limit", "The cell's capacity per host, by resource, from cluster.capacity.", []string{"cell", "resource"}, nil),
		capRatio:    prometheus.NewDesc("steadydns_capacity_used_ratio", "steadydns_capacity_used over steadydns_capacity_limit: above 1 the cell is over what was measured.", []string{"cell", "resource"}, nil),
		udpIn:       prometheus.NewDesc("steadydns_udp_bytes_in_total", "Bytes of the DNS messages the fallback received over UDP, by qtype (known types, else \"other\").", []string{"qtype"}, nil),
		rrlLimited:  prometheus.NewDesc("steadydns_rrl_limited_total", "Replies over the response rate limit (server.rrl), by the path that accounted them: slipped and dropped together.", []string{"path"}, nil),
		rrlSlip:     prometheus.NewDesc("steadydns_rrl_slipped_total", "Replies over the response rate limit sent truncated (TC=1, no records), by path.", []string{"path"}, nil),
		rrlDrop:     prometheus.NewDesc("steadydns_rrl_dropped_total", "Replies over the response rate limit not sent, by path.", []string{"path"}, nil),
		shifted:     prometheus.NewDesc("steadydns_shift_remaining_seconds", "Time left of each traffic shift in force, by region, where this host aggregates: the region's answers are out until it ends.", []string{"region"}, nil),
		udpOut:      prometheus.NewDesc("steadydns_udp_bytes_out_total", "Bytes of the DNS replies the fallback sent over UDP, by the qtype of their query (known types, else \"other\").", []string{"qtype"}, nil),
	}
}

// ObserveFallback counts one fallback reply and the time it took to build;
// it is fallback.Options.Observe. A message dropped without a reply
// ("dropped") is counted but has no latency.
func (m *Metrics) ObserveFallback(outcome string, took time.Duration) {
	v, ok := m.fallback.Load(outcome)
	if !ok {
		v, _ = m.fallback.LoadOrStore(outcome, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
	if outcome != "dropped" {
		m.replyLatency.Observe(took.Seconds())
	}
}

// ObserveUDP counts the bytes of one datagram the fallback received and of
// its reply (0 when none was sent); it is fallback.Options.UDP.
func (m *Metrics) ObserveUDP(qtype uint16, in, out int) {
	i, ok := udpIndex[qtype]
	if !ok {
		i = len(udpQtypes)
	}
	m.udp[i].in.Add(uint64(in))
	m.udp[i].out.Add(uint64(out))
}

// UDPBytes reads the bytes in and out counted for qtype's label.
func (m *Metrics) UDPBytes(qtype uint16) (in, out uint64) {
	i, ok := udpIndex[qtype]
	if !ok {
		i = len(udpQtypes)
	}
	return m.udp[i].in.Load(), m.udp[i].out.Load()
}

func newPanics() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "steadydns_panics_total",
		Help: "Panics the fallback recovered from, by where: answering a UDP datagram (udp), which went unanswered, or serving a TCP connection (tcp), which was closed. Each is logged with its stack."}, []string{"where"})
	// Both show from the start, at zero, so an alert on any increase
	// has a series to watch.
	c.WithLabelValues("udp")
	c.WithLabelValues("tcp")
	return c
}

// ObservePanic counts one panic the fallback recovered from; it is
// fallback.Options.OnPanic.
func (m *Metrics) ObservePanic(where string) { m.panics.WithLabelValues(where).Inc() }

// ObserveNotify counts one outcome of a notification target; it is
// notify.New's observe.
func (m *Metrics) ObserveNotify(target, outcome string) {
	m.notify.WithLabelValues(target, outcome).Inc()
}

func newNotifications() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "steadydns_notifications_total",
		Help: "State changes sent to each notification target (a webhook by its name, or nats), by outcome: sent, retried (an attempt failed), failed (given up), dropped (the queue was full)."},
		[]string{"target", "outcome"})
}

// FallbackCount reads one fallback outcome's count.
func (m *Metrics) FallbackCount(outcome string) uint64 {
	if v, ok := m.fallback.Load(outcome); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// ObserveCheck records the latency of one check run by this host's
// prober; typ is the check's type.
func (m *Metrics) ObserveCheck(typ string, r prober.Result) {
	m.checkLatency.WithLabelValues(typ, r.Reason.String()).Observe(r.Latency.Seconds())
}

// ObservePush records one health-table push; it is the aggregator's push
// observer.
func (m *Metrics) ObservePush(took time.Duration) { m.pushLatency.Observe(took.Seconds()) }

// ObserveReload counts one reload and whether it was rejected.
func (m *Metrics) ObserveReload(err error) {
	m.reloads.Add(1)
	if err != nil {
		m.reloadErrs.Add(1)
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.queries, m.passed, m.checkUp, m.vote, m.votesOver, m.tableAge, m.tableVer, m.coldStart, m.errDesc,
		m.frames, m.rejected, m.pushCost, m.reloadDesc, m.reloadErrDe, m.following, m.switches, m.revision, m.refused, m.messages, m.natsRefused, m.permErrs, m.capUsed, m.capLimit, m.capRatio,
		m.udpIn, m.udpOut, m.rrlLimited, m.rrlSlip, m.rrlDrop, m.shifted, m.tap.desc, m.tap.sdesc} {
		ch <- d
	}
	m.checkLatency.Describe(ch)
	m.replyLatency.Describe(ch)
	m.pushLatency.Describe(ch)
	m.panics.Describe(ch)
	m.notify.Describe(ch)
	for _, c := range m.tcp.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	xdp, err := m.src.XDPOutcomes()
	if err == nil {
		for outcome, n := range xdp {
			if xdpAnswered[outcome] {
				ch <- prometheus.MustNewConstMetric(m.queries, prometheus.CounterValue, float64(n), "xdp", outcome)
			} else {
				ch <- prometheus.MustNewConstMetric(m.passed, prometheus.CounterValue, float64(n), outcome)
			}
		}
	} else {
		m.scrapeErrs.Add(1)
	}
	m.fallback.Range(func(k, v any) bool {
		ch <- prometheus.MustNewConstMetric(m.queries, prometheus.CounterValue, float64(v.(*atomic.Uint64).Load()), "fallback", k.(string))
		return true
	})
	m.collectRRL(ch, xdp)
	m.tap.collect(ch)
	ch <- prometheus.MustNewConstMetric(m.errDesc, prometheus.CounterValue, float64(m.scrapeErrs.Load()))
	for i := range m.udp {
		label := "other"
		if i < len(udpQtypes) {
			label = dns.TypeToString[udpQtypes[i]]
		}
		ch <- prometheus.MustNewConstMetric(m.udpIn, prometheus.CounterValue, float64(m.udp[i].in.Load()), label)
		ch <- prometheus.MustNewConstMetric(m.udpOut, prometheus.CounterValue, float64(m.udp[i].out.Load()), label)
	}
	m.collectChecks(ch)
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
	ch <- prometheus.MustNewConstMetric(m.reloadDesc, prometheus.CounterValue, float64(m.reloads.Load()))
	ch <- prometheus.MustNewConstMetric(m.reloadErrDe, prometheus.CounterValue, float64(m.reloadErrs.Load()))
	m.checkLatency.Collect(ch)
	m.replyLatency.Collect(ch)
	m.pushLatency.Collect(ch)
	m.panics.Collect(ch)
	m.notify.Collect(ch)
	for _, c := range m.tcp.collectors() {
		c.Collect(ch)
	}
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
	for what, n := range f.NATSRefused {
		ch <- prometheus.MustNewConstMetric(m.natsRefused, prometheus.CounterValue, float64(n), what)
	}
	for kind, c := range f.Messages {
		for result, n := range c {
			ch <- prometheus.MustNewConstMetric(m.messages, prometheus.CounterValue, float64(n), kind, result)
		}
	}
}

// collectChecks sends each check's state and the votes counted for it.
func (m *Metrics) collectChecks(ch chan<- prometheus.Metric) {
	votes, dropped := 0, 0
	for _, s := range m.src.Statuses() {
		ch <- prometheus.MustNewConstMetric(m.checkUp, prometheus.GaugeValue, b2f(s.Up), s.ID)
		for _, v := range s.Votes {
			if !v.Counted {
				continue
			}
			if votes == MaxVoteSeries {
				dropped++
				continue
			}
			votes++
			ch <- prometheus.MustNewConstMetric(m.vote, prometheus.GaugeValue, b2f(v.Healthy), s.ID, v.Checker)
		}
	}
	ch <- prometheus.MustNewConstMetric(m.votesOver, prometheus.GaugeValue, float64(dropped))
	if a := m.src.Aggregator(); a != nil {
		now := time.Now()
		for _, s := range a.Shifts(now) {
			ch <- prometheus.MustNewConstMetric(m.shifted, prometheus.GaugeValue, s.Expires.Sub(now).Seconds(), s.Region)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectRRL reports the replies over the rate limit per path, from the
// XDP counters (nil when they could not be read) and the fallback's
// outcomes.
func (m *Metrics) collectRRL(ch chan<- prometheus.Metric, xdp map[string]uint64) {
	fallback := func(outcome string) uint64 {
		if v, ok := m.fallback.Load(outcome); ok {
			return v.(*atomic.Uint64).Load()
		}
		return 0
	}
	paths := []struct {
		path           string
		slipped, dropd uint64
	}{{"fallback", fallback(rrlSlipped), fallback(rrlDropped)}}
	if xdp != nil {
		paths = append(paths, struct {
			path           string
			slipped, dropd uint64
		}{"xdp", xdp[rrlSlipped], xdp[rrlDropped]})
	}
	for _, p := range paths {
		ch <- prometheus.MustNewConstMetric(m.rrlLimited, prometheus.CounterValue, float64(p.slipped+p.dropd), p.path)
		ch <- prometheus.MustNewConstMetric(m.rrlSlip, prometheus.CounterValue, float64(p.slipped), p.path)
		ch <- prometheus.MustNewConstMetric(m.rrlDrop, prometheus.CounterValue, float64(p.dropd), p.path)
	}
}
