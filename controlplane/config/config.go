// Package config loads and validates the steadydns YAML config.
//
// Every error names the file, line and key path, such as
// "config.yaml:12: records[0].answers[1].check: unknown health check "web9"",
// so that `steadydns check` and a rejected reload point at the mistake.
package config

import (
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/prober"
)

// MaxCandidates is the number of candidates a record can hold: up to
// MAX_CANDIDATES in its slot of the record table, more in the pool map.
// The XDP program visits all of them on every query, so a record with
// more answers is rejected rather than truncated. MaxAnswers is the most
// one reply carries, max_answers' bound and default.
const (
	MaxCandidates = int(bpf.SteadydnsLimitsPOOL_CANDIDATES)
	MaxAnswers    = int(bpf.SteadydnsLimitsMAX_ANSWERS)
)

// MaxNSID is the longest server.nsid in bytes, what the XDP program
// carries.
const MaxNSID = int(bpf.SteadydnsLimitsNSID_MAX)

// Config is a loaded and validated config file.
type Config struct {
	File        string // the path as given to Load or Parse
	Server      Server
	Zones       []Zone
	Checks      Checks // health_checks, in file order
	Records     []Record
	Aggregation Aggregation
	Cluster     Cluster
	Notify      Notify

	// Hash identifies the health-relevant config: health_checks, records and
	// aggregation, after defaults. Hosts reject frames and tables whose hash
	// differs from their own. Formatting and key order do not change it.
	Hash uint64

	lines    lineIndex         // key path -> line
	sections map[string]string // top-level key -> its file, where not File
}

// Server is the server section: where this host answers and is managed.
type Server struct {
	Interfaces []string         // XDP attaches here; empty means fallback only
	XDPMode    string           // auto, native or generic
	Listen     []netip.AddrPort // fallback UDP+TCP addresses; XDP answers for the same ones
	API        string           // host:port of the HTTP API and metrics
	BPFFS      string           // where maps and the XDP link are pinned
	StateDir   string           // where the state that outlives the process is written; default /var/lib/steadydns
	MaxRecords int              // record sets the record table holds; default 65536
	Geo        *Geo             // client prefixes to regions; nil without geo
	// IDServer answers id.server and hostname.bind CH TXT with the
	// host's id; default false, as BIND's server-id.
	IDServer bool
	// VersionServer answers version.server and version.bind CH TXT with
	// the build's version; default true, as BIND and Knot do.
	VersionServer bool
	// NSID is the value replies carry in an NSID option (RFC 5001) when
	// the query asks for it, on both paths; empty (the default) turns it
	// off. At most MaxNSID bytes.
	NSID  []byte
	Debug Debug
	TCP   TCP
	// Dnstap, when set, logs every query the fallback answers and its
	// reply as dnstap; nil logs none.
	Dnstap *Dnstap
	RRL    *RRL // response rate limiting; on by default, nil only for server.rrl.rate 0
	// APITokenFile holds the bearer token that every write to the API
	// (admin, external, reload) needs; empty: StateDir's api.token,
	// created at the first start. Absolute; relative paths in the config
	// resolve against its directory, as for the other files below.
	APITokenFile string
	// APIReadTokenFile, when set, holds a token that the API's reads but
	// /healthz and /readyz need (the write token also does); empty: the
	// reads are open.
	APIReadTokenFile string
	// APIHosts are the names a request's Host may give besides localhost,
	// the API's own host and IP literals; others get 403, against DNS
	// rebinding.
	APIHosts []string
	APITLS   *APITLS // the API over HTTPS; nil: plain HTTP
	DoT      *DoT    // DNS over TLS; nil: none
}

// APITLS is server.api_tls: the API's certificate and key, PEM files.
type APITLS struct {
	Cert, Key string // absolute
}

// DoT is server.tls: DNS over TLS (RFC 7858) from the fallback, on its
// own addresses, under server.tcp's limits.
type DoT struct {
	Listen    []netip.AddrPort
	Cert, Key string // absolute; read again on every reload
}

// TCP is server.tcp: bounds on the fallback's TCP connections. A zero
// field takes the fallback's default (docs/config.md).
type TCP struct {
	MaxConnections int           // open at once, all clients
	MaxPerPrefix   int           // open at once from one client /24 (IPv4) or /48 (IPv6)
	IdleTimeout    time.Duration // a connection with no query in progress closes after this
	MaxPipelined   int           // queries one connection is answered in its lifetime; 0: no limit
	MaxLifetime    time.Duration // a connection closes this long after it opened, between two queries
}

// RRL is server.rrl: response rate limiting on both paths
// (docs/config.md).
type RRL struct {
	Rate       int           // replies per second per key
	Slip       int           // every Slip-th reply over the limit goes out truncated; 0: none
	Window     time.Duration // how long a flood stays limited after it stops
	IPv4Prefix int           // client prefix length that makes one key
	IPv6Prefix int
	Exempt     []netip.Prefix // clients never limited
	TableSize  int            // accounts the table holds (rounded up to a power of two)
}

// Dnstap is server.dnstap: where the fallback's dnstap messages go, a
// Unix socket (absolute) or a TCP address, one of the two, and the share
// of XDP's answers logged with them.
type Dnstap struct {
	Socket string
	TCP    string
	// Sample logs one in Sample of the queries XDP answers, marked as
	// sampled; 0 none. Default DefaultDnstapSample.
	Sample int
}

// DefaultDnstapSample is server.dnstap.sample unless set; MaxDnstapSample
// is the most it may be.
const (
	DefaultDnstapSample = 100
	MaxDnstapSample     = 1 << 24
)

// Debug is server.debug: a TXT name that explains the health of a record
// set to the clients allowed.
type Debug struct {
	Name  string         // fully qualified, lowercase; empty turns it off
	Allow []netip.Prefix // clients answered; others get REFUSED. Default loopback only
}

// Zone is an RFC 1035 zone file served for an origin.
type Zone struct {
	Origin string  // fully qualified, lowercase
	File   string  // absolute; relative paths in the config resolve against its directory
	DNSSEC *DNSSEC // nil: answers are signed only as the zone file signs them
}

// DNSSEC turns on online signing for a zone.
type DNSSEC struct {
	Keys      string // key directory, absolute; created with keys when empty
	Algorithm string // ecdsap256sha256 (default) or ed25519, lowercase
	Split     bool   // a KSK and a ZSK rather than one combined key

	// The rollover schedule's waits (docs/dnssec.md), and the age at
	// which serve rolls a ZSK over by itself (0: never).
	DNSKEYTTL, MaxTTL, DSTTL, Propagation time.Duration
	ZSKLifetime                           time.Duration
}

// DNSSEC algorithms a zone may name.
var DNSSECAlgorithms = []string{"ecdsap256sha256", "ed25519"}

// Check is one health check. Fields that do not apply to its Type keep their
// zero value: the loader rejects keys that do not apply, so a zero value
// never hides a setting.
type Check struct {
	ID   string
	Type CheckType

	// Target is an IP address or hostname. Empty means the address of each
	// answer that uses the check.
	Target string
	Port   uint16 // http 80, https 443 and dns 53 by default; required for tcp and udp

	// http and https
	Path             string               // default "/"
	Method           string               // default GET
	Host             string               // Host header; empty means the target
	SNI              string               // https only; empty means Host, then the target
	TLSVerify        bool                 // https only; default true
	ExpectStatus     []prober.StatusRange // default 200-399
	ExpectBody       string               // substring searched in the first 5,120 bytes
	ExpectBodyRegexp *regexp.Regexp
	KeepAlive        bool // reuse one connection between runs; default a fresh connection per run

	// tcp: without Send, Expect and ExpectRegexp the check only connects
	Send   string // written once connected; escapes decoded
	Expect string // substring searched in the first 5,120 bytes of the reply

	// tcp and udp: instead of Expect or ExpectReply
	ExpectRegexp *regexp.Regexp

	// udp
	Payload     string // required
	ExpectReply string // empty accepts any reply

	// dns
	QName        string // required; fully qualified, lowercase
	QType        uint16 // default A
	ExpectRcode  int    // default NOERROR
	ExpectAnswer string // empty accepts any answer

	// metric: an instant query to a Prometheus-compatible API, healthy
	// when its result holds samples and none is zero
	URL              string // required; the API's base URL
	Query            string // required; PromQL
	InsufficientData string // the state without data: healthy, unhealthy or last_known (the default)

	// calculated: healthy while at least MinHealthy children are healthy
	Children   []string
	MinHealthy int // default len(Children)

	// external: pushed through the API; forgotten TTL after the last push
	TTL time.Duration // default 30s
	// Initial is an external check's state until its first report:
	// healthy (the default, as every new check starts) or unhealthy.
	Initial string

	// Probed types (all but calculated and external) run every Interval and
	// change state after that many consecutive results.
	Interval           time.Duration // default 10s, at least 100ms
	Timeout            time.Duration // default 2s or Interval if shorter; at most Interval
	UnhealthyThreshold int           // default 3, 1-10
	HealthyThreshold   int           // default 3, 1-10

	Invert bool
	Admin  string // auto, up or down; default auto

	// Cell is the cell whose probers run the check and whose aggregators
	// aggregate it; default the first of cluster.cells.
	Cell string

	// Regions are the prober regions that run a probed check and whose
	// votes make its quorum, as Route 53 lets a check pick at least three
	// checker regions; empty means every prober, region or not.
	Regions []string
}

// Record is a health-checked A, AAAA or CNAME record set.
type Record struct {
	Name        string      // fully qualified, lowercase
	Type        uint16      // dns.TypeA, dns.TypeAAAA or dns.TypeCNAME
	TTL         uint32      // default 60
	Policy      Policy      // default multivalue
	MaxAnswers  int         // default MaxAnswers
	WhenAllDown WhenAllDown // default answer_all
	MinHealthy  MinHealthy
	TTLDegraded uint32      // TTL while any candidate is down; 0 means TTL
	Stale       StalePolicy // stale_policy; default keep
	Answers     []Answer
}

// MinHealthy keeps a record failing open until enough candidates are
// healthy. At most one field is set; zero means no minimum.
type MinHealthy struct {
	Count   int
	Percent int // of the record's answers
}

// Answer is one candidate of a record: an address (Value), a CNAME's
// target (Target), or an alias (Alias) that answers the current answers
// of another set of the same type.
type Answer struct {
	Value  netip.Addr // IPv4 for A, IPv6 for AAAA
	Target string     // CNAME: the target name, fully qualified, lowercase
	Alias  string     // A and AAAA instead of Value: the target set's name, fully qualified, lowercase
	// EvaluateTargetHealth makes an alias healthy while its target has a
	// healthy candidate (TargetCheckID); without it an alias is always
	// healthy, or as healthy as its Check.
	EvaluateTargetHealth bool
	Check                string // health check id; empty means always healthy
	Weight               uint8  // default 1
	Priority             uint8  // lower is preferred by failover
	Backup               bool
	Region               string
}

// Aggregation controls how probe results become the health table.
type Aggregation struct {
	PushInterval time.Duration // default 1s, at least 50ms
	Quorum       float64       // healthy when more than this share of checkers agree; default 0.18
	StaleAfter   time.Duration // default 10s; 0 means tables never go stale
	TableSize    int           // entries; a power of two from 16 to 1<<22, default 65536
	Hysteresis   *Hysteresis   // nil means the quorum alone decides
	// CheckerTimeout is how long a checker counts in the quorum after its
	// last frame: a prober cut off by a partition leaves the denominator
	// then. Default three push intervals.
	CheckerTimeout time.Duration
}

// Hysteresis replaces the single quorum with two thresholds, so a check
// near the quorum does not flap.
type Hysteresis struct {
	Down float64 // unhealthy when the healthy share falls below this
	Up   float64 // healthy again only when it reaches this
}

// Served is c without the line of every key path, which only errors
// about c need. A host reports those while it builds what it serves from
// a config (daemon.Build), and keeps the config as long as it serves it:
// the lines of a fleet's 65,536 checks are 16 MB, which an aggregator
// would keep live for nothing, and its garbage collector's headroom, which
// its per-push garbage cycles through, grows with its live heap. Errorf
// on a served config names the file and key without a line.
func (c *Config) Served() *Config {
	s := *c
	s.lines = lineIndex{}
	return &s
}

// Line returns the line of a key path such as "health_checks.web1.port" or
// "records[0].answers[1]", or 0 if the file has no such key.
func (c *Config) Line(key string) int {
	l, _ := c.lines.get(key)
	return l
}

// Errorf builds an Error for a key path. A key missing from the file is
// reported at the line of its nearest enclosing key, which is where the
// reader has to add it.
func (c *Config) Errorf(key, format string, args ...any) *Error {
	return newError(sectionFile(c.File, c.sections, key), c.lines.get, key, format, args...)
}

// nearestLine finds the line of key or, failing that, of its closest ancestor.
// line looks a key path up.
func nearestLine(line func(key string) (int, bool), key string) int {
	for {
		if l, ok := line(key); ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			l, _ := line("")
			return l
		}
		key = key[:i]
	}
}
