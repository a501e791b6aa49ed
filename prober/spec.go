package prober

import (
	"regexp"
	"time"
)

// Type is the kind of probe a checker sends. Its value is the check type's
// name in the config file, so a config and a log say the same word.
type Type string

const (
	HTTP  Type = "http"
	HTTPS Type = "https"
	TCP   Type = "tcp"
	UDP   Type = "udp"
	ICMP  Type = "icmp"
	DNS   Type = "dns"
	// Metric asks a Prometheus-compatible HTTP API: the answer's address
	// plays no part.
	Metric Type = "metric"
)

// Types lists every type a prober runs, in the order the docs list them.
var Types = []Type{HTTP, HTTPS, TCP, UDP, ICMP, DNS, Metric}

// Spec is what a checker needs to probe: where, how, and what counts as
// healthy. Settings that do not apply to its Type are ignored. Thresholds,
// invert and admin overrides are not here: they apply to results, in the
// aggregator.
type Spec struct {
	Type Type

	// Target is an IP address or hostname. Empty means the address New is
	// given, that of the answer the check belongs to.
	Target string
	Port   uint16

	Interval time.Duration // between runs; the Scheduler's
	Timeout  time.Duration // per run, from start to verdict

	// http and https
	Path             string
	Method           string
	Host             string // Host header; empty means the target
	SNI              string // https; empty means Host's name, then the target
	TLSVerify        bool   // https
	ExpectStatus     []StatusRange
	ExpectBody       string         // substring of the first BodyLimit bytes; empty accepts any
	ExpectBodyRegexp *regexp.Regexp // matched against the first BodyLimit bytes; nil accepts any
	KeepAlive        bool           // reuse one connection between runs

	// tcp: without Send, Expect and ExpectRegexp the check only connects
	Send   string // written once connected
	Expect string // substring of the reply's first BodyLimit bytes

	// tcp and udp
	ExpectRegexp *regexp.Regexp // matched against the reply instead of Expect or ExpectReply

	// udp
	Payload     string
	ExpectReply string // substring of the reply; empty accepts any reply

	// dns
	QName        string // fully qualified
	QType        uint16
	ExpectRcode  int
	ExpectAnswer string // substring of some answer's rdata; empty accepts any

	// metric
	URL   string // the API's base URL: http://host:9090, /api/v1/query is appended
	Query string // PromQL, evaluated as an instant query
	// Insufficient is the result reported when the query gives no data or
	// fails. It is raw, like every result: the aggregator inverts it.
	Insufficient Insufficient
}

// Insufficient is what a metric check reports without data to judge by,
// as Route 53 offers for a CloudWatch alarm in INSUFFICIENT_DATA.
type Insufficient string

const (
	InsufficientHealthy   Insufficient = "healthy"
	InsufficientUnhealthy Insufficient = "unhealthy"
	// InsufficientLastKnown repeats the last verdict the query gave, as
	// if the metric held its value; healthy before any, as a check starts.
	InsufficientLastKnown Insufficient = "last_known"
)

// Insufficients lists every Insufficient, in the order the docs list them.
var Insufficients = []Insufficient{InsufficientHealthy, InsufficientUnhealthy, InsufficientLastKnown}

// StatusRange is an inclusive range of HTTP status codes.
type StatusRange struct{ Lo, Hi int }

// Contains reports whether code lies in the range.
func (r StatusRange) Contains(code int) bool { return r.Lo <= code && code <= r.Hi }
