package config

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	yaml "go.yaml.in/yaml/v3"

	"github.com/steadydns/steadydns/bpf"
)

// Load reads and validates the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *fs.PathError already names the file
	}
	return Parse(path, data)
}

// Parse validates config data. file names the data in errors, and zone
// files with relative paths resolve against its directory.
func Parse(file string, data []byte) (*Config, error) {
	restore := lowerGC()
	defer restore()
	doc, err := parseDoc(file, data)
	if err != nil {
		return nil, err
	}
	return decode(&decoder{file: file, lines: map[string]int{}, treeDone: restore}, doc)
}

// LocalSections are the sections a host of a fleet always reads from its
// own file; the others are the fleet's and may come from a pushed revision.
var LocalSections = []string{"server", "cluster"}

// ParseFleet composes a host's config from its own file, which gives the
// server and cluster sections, and a revision of the fleet sections
// (zones, health_checks, records, aggregation) pushed to the config bucket.
// Errors name the file each key came from; zone files resolve against the
// revision's directory. The revision's own server and cluster sections,
// which were the pushing host's, are ignored.
func ParseFleet(localFile string, local []byte, fleetFile string, fleet []byte) (*Config, error) {
	restore := lowerGC()
	defer restore()
	ldoc, err := parseDoc(localFile, local)
	if err != nil {
		return nil, err
	}
	fdoc, err := parseDoc(fleetFile, fleet)
	if err != nil {
		return nil, err
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Line: 1}
	d := &decoder{file: localFile, lines: map[string]int{}, sections: map[string]string{}, treeDone: restore}
	var errs []*Error
	for _, pair := range pairs(rootOf(ldoc)) {
		if !slices.Contains(LocalSections, pair[0].Value) {
			errs = append(errs, &Error{File: localFile, Line: pair[0].Line, Key: pair[0].Value,
				Msg: "with cluster.config: nats this section comes from the config bucket (steadydns config push): remove it here"})
			continue
		}
		root.Content = append(root.Content, pair[0], pair[1])
	}
	for _, pair := range pairs(rootOf(fdoc)) {
		if slices.Contains(LocalSections, pair[0].Value) {
			continue
		}
		d.sections[pair[0].Value] = fleetFile
		root.Content = append(root.Content, pair[0], pair[1])
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return decode(d, root)
}

func parseDoc(file string, data []byte) (*yaml.Node, error) {
	var doc, next yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, syntaxError(file, data, err)
	}
	// A second document would otherwise be ignored without a word.
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{File: file, Line: next.Line, Msg: "only one YAML document is allowed"}
	case err != io.EOF:
		return nil, syntaxError(file, data, err)
	}
	return &doc, nil
}

// rootOf is a document's top-level mapping, or nil.
func rootOf(doc *yaml.Node) *yaml.Node {
	root := doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	root = value(root)
	if root == nil || root.Kind != yaml.MappingNode {
		return nil
	}
	return root
}

// pairs lists a mapping's keys and values.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	if n == nil {
		return nil
	}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
	}
	return out
}

func decode(d *decoder, doc *yaml.Node) (*Config, error) {
	c, checks := d.config(doc)
	// The tree is garbage from here.
	d.treeDone()
	// Validation runs only on a cleanly decoded file: a value that failed to
	// decode would otherwise be reported a second time as missing.
	if len(d.errs) > 0 {
		return nil, joinErrors(d.errs)
	}
	if errs := c.validate(checks); len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	targets, errs := c.targetChecks(checks)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	checks = append(checks, targets...)
	// Packed once validation has filled in the defaults it resolves.
	c.Checks = NewChecks(checks)
	c.Hash = c.hash()
	return c, nil
}

var (
	topKeys         = []string{"server", "zones", "health_checks", "records", "aggregation", "cluster", "notify"}
	serverKeys      = []string{"interfaces", "xdp_mode", "listen", "api", "bpffs", "state_dir", "max_records", "geo", "id_server", "version_server", "nsid", "debug", "tcp", "rrl", "api_token_file", "api_read_token_file", "api_hosts", "api_tls", "tls", "dnstap"}
	apiTLSKeys      = []string{"cert", "key"}
	dotKeys         = []string{"listen", "cert", "key"}
	rrlKeys         = []string{"rate", "slip", "window", "ipv4_prefix", "ipv6_prefix", "exempt", "table_size"}
	tcpKeys         = []string{"max_connections", "max_per_prefix", "idle_timeout", "max_pipelined", "max_lifetime"}
	debugKeys       = []string{"name", "allow"}
	dnstapKeys      = []string{"socket", "tcp", "sample"}
	geoKeys         = []string{"regions"}
	zoneKeys        = []string{"origin", "file", "dnssec"}
	dnssecKeys      = []string{"keys", "algorithm", "split", "dnskey_ttl", "max_ttl", "ds_ttl", "propagation", "zsk_lifetime"}
	recordKeys      = []string{"name", "type", "ttl", "policy", "max_answers", "when_all_down", "min_healthy", "ttl_degraded", "stale_policy", "answers"}
	answerKeys      = []string{"value", "alias", "evaluate_target_health", "check", "weight", "priority", "backup", "region"}
	aggregationKeys = []string{"push_interval", "quorum", "stale_after", "table_size", "hysteresis", "checker_timeout"}
	hysteresisKeys  = []string{"down", "up"}
)

// config decodes the file; its checks come apart, for validation to
// complete before they are packed.
func (d *decoder) config(doc *yaml.Node) (*Config, []*Check) {
	c := &Config{File: d.file, sections: d.sections}
	root := doc
	if doc.Kind == yaml.DocumentNode {
		root = doc.Content[0]
	}
	root = value(root)
	if root != nil {
		d.lines[""] = root.Line
	}
	f := d.mapping(root, "", topKeys)
	c.Server = d.server(f.mapping("server", serverKeys))
	f.list("zones", func(path string, n *yaml.Node) {
		c.Zones = append(c.Zones, d.zone(d.mapping(n, path, zoneKeys)))
	})
	// The two collections that grow with a fleet leave the tree as they
	// are decoded.
	var checks []*Check
	d.each(f.get("health_checks"), "health_checks", true, func(e entry) {
		if strings.ContainsFunc(e.key, func(r rune) bool { return !validIDRune(r) }) || e.key == "" {
			// Ids appear in key paths and API URLs, where '.', '[' or '/' would be ambiguous.
			d.errorf(e.keyNode, e.path, "check id %q may contain only letters, digits, '_' and '-'", e.key)
			return
		}
		checks = append(checks, d.check(e.key, e.val, e.path))
	})
	d.list(f.get("records"), f.key("records"), true, func(path string, n *yaml.Node) {
		c.Records = append(c.Records, d.record(d.mapping(n, path, recordKeys)))
	})
	c.Aggregation = d.aggregation(f.mapping("aggregation", aggregationKeys))
	c.Cluster = d.cluster(f.mapping("cluster", clusterKeys))
	c.Notify = d.notify(f.mapping("notify", notifyKeys))
	c.lines = newLineIndex(d.lines)
	return c, checks
}

func validIDRune(r rune) bool {
	return r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// addrPorts decodes the list of ip:port addresses at key; port is the
// one the error's examples give.
func (d *decoder) addrPorts(f fields, key, port string) []netip.AddrPort {
	var aps []netip.AddrPort
	f.list(key, func(path string, n *yaml.Node) {
		v, ok := d.scalar(n, path, "an address")
		if !ok {
			return
		}
		ap, err := netip.ParseAddrPort(v)
		if err != nil {
			d.errorf(n, path, "invalid listen address %q, want ip:port such as 198.18.0.2:%s or [fd53::2]:%s", v, port, port)
			return
		}
		aps = append(aps, ap)
	})
	return aps
}

func (d *decoder) server(f fields) Server {
	s := Server{XDPMode: "auto", API: "127.0.0.1:9153", BPFFS: "/sys/fs/bpf/steadydns", StateDir: "/var/lib/steadydns", MaxRecords: 1 << 16, VersionServer: true,
		Debug: Debug{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}}
	f.strs("interfaces", &s.Interfaces)
	f.str("xdp_mode", &s.XDPMode)
	s.Listen = d.addrPorts(f, "listen", "53")
	f.str("api", &s.API)
	f.str("bpffs", &s.BPFFS)
	f.str("state_dir", &s.StateDir)
	f.int("max_records", &s.MaxRecords)
	if f.has("geo") {
		s.Geo = d.geo(f.mapping("geo", geoKeys))
	}
	f.bool("id_server", &s.IDServer)
	f.bool("version_server", &s.VersionServer)
	var nsid string
	f.str("nsid", &nsid)
	if nsid != "" {
		var err error
		if s.NSID, err = parseNSID(nsid); err != nil {
			d.errorf(f.get("nsid"), f.key("nsid"), "%v", err)
		}
	}
	if f.has("tcp") {
		tf := f.mapping("tcp", tcpKeys)
		// Zero is how a key left out reads, so a zero written would
		// silently mean the default.
		positive := func(k string, decode func(), v func() int64) {
			errs := len(d.errs)
			decode()
			if n := tf.get(k); n != nil && len(d.errs) == errs && v() <= 0 {
				d.errorf(n, tf.key(k), "must be positive, got %s; leave the key out for the default", n.Value)
			}
		}
		positive("max_connections", func() { tf.int("max_connections", &s.TCP.MaxConnections) }, func() int64 { return int64(s.TCP.MaxConnections) })
		positive("max_per_prefix", func() { tf.int("max_per_prefix", &s.TCP.MaxPerPrefix) }, func() int64 { return int64(s.TCP.MaxPerPrefix) })
		positive("idle_timeout", func() { tf.duration("idle_timeout", &s.TCP.IdleTimeout) }, func() int64 { return int64(s.TCP.IdleTimeout) })
		positive("max_pipelined", func() { tf.int("max_pipelined", &s.TCP.MaxPipelined) }, func() int64 { return int64(s.TCP.MaxPipelined) })
		positive("max_lifetime", func() { tf.duration("max_lifetime", &s.TCP.MaxLifetime) }, func() int64 { return int64(s.TCP.MaxLifetime) })
	}
	s.RRL = d.rrl(f.mapping("rrl", rrlKeys))
	// The API's files resolve against the directory of the file that
	// holds the server section.
	path := func(f fields, k string, dst *string) {
		f.str(k, dst)
		if *dst != "" && !filepath.IsAbs(*dst) {
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(d.fileOf("server")), *dst))
			if err != nil {
				d.errorf(f.get(k), f.key(k), "resolving the file's path: %v", err)
			}
			*dst = abs
		}
	}
	path(f, "api_token_file", &s.APITokenFile)
	path(f, "api_read_token_file", &s.APIReadTokenFile)
	f.strs("api_hosts", &s.APIHosts)
	if f.has("api_tls") {
		tf := f.mapping("api_tls", apiTLSKeys)
		s.APITLS = &APITLS{}
		path(tf, "cert", &s.APITLS.Cert)
		path(tf, "key", &s.APITLS.Key)
	}
	if f.has("tls") {
		tf := f.mapping("tls", dotKeys)
		s.DoT = &DoT{Listen: d.addrPorts(tf, "listen", "853")}
		path(tf, "cert", &s.DoT.Cert)
		path(tf, "key", &s.DoT.Key)
	}
	if f.has("dnstap") {
		df := f.mapping("dnstap", dnstapKeys)
		s.Dnstap = &Dnstap{Sample: DefaultDnstapSample}
		path(df, "socket", &s.Dnstap.Socket)
		df.str("tcp", &s.Dnstap.TCP)
		df.int("sample", &s.Dnstap.Sample)
	}
	if f.has("debug") {
		df := f.mapping("debug", debugKeys)
		df.str("name", &s.Debug.Name)
		if s.Debug.Name != "" {
			s.Debug.Name = dns.Fqdn(strings.ToLower(s.Debug.Name))
		}
		if df.has("allow") {
			s.Debug.Allow = nil
		}
		df.prefixes("allow", &s.Debug.Allow)
	}
	return s
}

// defaultRRLRate is server.rrl.rate when left out, NSD's: replies per
// second to one client prefix for one name and type, which a resolver
// asking on behalf of its users does not reach (it caches the answer for
// its TTL), while a reflected flood does within its first second.
const defaultRRLRate = 200

// rrl decodes server.rrl, which is on without the section: nil only for
// rate 0. The defaults are BIND's but for the rate: slip 2, window 15 s,
// /24 and /56; the table's is the program's.
func (d *decoder) rrl(f fields) *RRL {
	r := &RRL{Rate: defaultRRLRate, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56, TableSize: int(bpf.SteadydnsLimitsRRL_TABLE_DEFAULT)}
	within := func(k string, lo, hi int64, v func() int64, unit string) {
		if n := f.get(k); n != nil && (v() < lo || v() > hi) {
			d.errorf(n, f.key(k), "%s out of range %d-%d%s", n.Value, lo, hi, unit)
		}
	}
	errs := len(d.errs)
	f.int("rate", &r.Rate)
	f.int("slip", &r.Slip)
	f.duration("window", &r.Window)
	f.int("ipv4_prefix", &r.IPv4Prefix)
	f.int("ipv6_prefix", &r.IPv6Prefix)
	f.int("table_size", &r.TableSize)
	if len(d.errs) == errs {
		// BIND's ranges, but for the IPv6 prefix, which the key holds up
		// to /64.
		within("rate", 0, 1000000, func() int64 { return int64(r.Rate) }, "")
		within("slip", 0, 10, func() int64 { return int64(r.Slip) }, "")
		within("window", 1, 3600, func() int64 {
			if r.Window%time.Second != 0 {
				return 0
			}
			return int64(r.Window / time.Second)
		}, " whole seconds")
		within("ipv4_prefix", 0, 32, func() int64 { return int64(r.IPv4Prefix) }, "")
		within("ipv6_prefix", 0, int64(bpf.SteadydnsLimitsRRL_V6PREFIX_MAX), func() int64 { return int64(r.IPv6Prefix) }, "")
		within("table_size", int64(bpf.SteadydnsLimitsRRL_TABLE_MIN), int64(bpf.SteadydnsLimitsRRL_TABLE_MAX), func() int64 { return int64(r.TableSize) }, "")
	}
	f.prefixes("exempt", &r.Exempt)
	if r.Rate == 0 {
		// Off: the other keys are checked all the same, so that turning
		// it back on is the one edit.
		return nil
	}
	return r
}

func (d *decoder) zone(f fields) Zone {
	var z Zone
	f.str("origin", &z.Origin)
	if z.Origin != "" {
		z.Origin = dns.Fqdn(strings.ToLower(z.Origin))
	}
	f.str("file", &z.File)
	if z.File != "" {
		if !filepath.IsAbs(z.File) {
			z.File = filepath.Join(filepath.Dir(d.fileOf("zones")), z.File)
		}
		abs, err := filepath.Abs(z.File)
		if err != nil {
			d.errorf(f.get("file"), f.key("file"), "resolving zone file path: %v", err)
		}
		z.File = abs
	}
	if f.has("dnssec") {
		z.DNSSEC = d.dnssec(f.mapping("dnssec", dnssecKeys))
	}
	return z
}

func (d *decoder) dnssec(f fields) *DNSSEC {
	s := &DNSSEC{Algorithm: DNSSECAlgorithms[0], DNSKEYTTL: time.Hour, MaxTTL: 24 * time.Hour, DSTTL: 24 * time.Hour, Propagation: time.Hour}
	f.str("keys", &s.Keys)
	if s.Keys != "" && !filepath.IsAbs(s.Keys) {
		abs, err := filepath.Abs(filepath.Join(filepath.Dir(d.fileOf("zones")), s.Keys))
		if err != nil {
			d.errorf(f.get("keys"), f.key("keys"), "resolving key directory path: %v", err)
		}
		s.Keys = abs
	}
	f.str("algorithm", &s.Algorithm)
	s.Algorithm = strings.ToLower(s.Algorithm)
	f.bool("split", &s.Split)
	f.days("dnskey_ttl", &s.DNSKEYTTL)
	f.days("max_ttl", &s.MaxTTL)
	f.days("ds_ttl", &s.DSTTL)
	f.days("propagation", &s.Propagation)
	f.days("zsk_lifetime", &s.ZSKLifetime)
	return s
}

// days is duration that also takes a whole number of days, "90d", as key
// lifetimes are told.
func (f fields) days(k string, dst *time.Duration) {
	n := f.get(k)
	if n == nil {
		return
	}
	s, ok := f.d.scalar(n, f.key(k), "a duration")
	if !ok {
		return
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if v, err := strconv.ParseUint(d, 10, 16); err == nil {
			*dst = time.Duration(v) * 24 * time.Hour
			return
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		f.d.errorf(n, f.key(k), "expected a duration such as 1h or 90d, got %q", s)
		return
	}
	*dst = v
}

func (d *decoder) record(f fields) Record {
	r := Record{TTL: 60, Policy: PolicyMultivalue, MaxAnswers: MaxAnswers, WhenAllDown: WhenAllDownAnswerAll, Stale: StaleKeep}
	f.str("name", &r.Name)
	if r.Name != "" {
		r.Name = dns.Fqdn(strings.ToLower(r.Name))
	}
	if n := f.get("type"); n != nil {
		if s, ok := d.scalar(n, f.key("type"), "A, AAAA or CNAME"); ok {
			switch strings.ToUpper(s) {
			case "A":
				r.Type = dns.TypeA
			case "AAAA":
				r.Type = dns.TypeAAAA
			case "CNAME":
				r.Type = dns.TypeCNAME
			default:
				d.errorf(n, f.key("type"), "unsupported type %q, want A, AAAA or CNAME", s)
			}
		}
	}
	uintField(f, "ttl", &r.TTL)
	strField(f, "policy", &r.Policy)
	f.int("max_answers", &r.MaxAnswers)
	strField(f, "when_all_down", &r.WhenAllDown)
	if n := f.get("min_healthy"); n != nil {
		r.MinHealthy = d.minHealthy(n, f.key("min_healthy"))
	}
	uintField(f, "ttl_degraded", &r.TTLDegraded)
	strField(f, "stale_policy", &r.Stale)
	f.list("answers", func(path string, n *yaml.Node) {
		r.Answers = append(r.Answers, d.answer(d.mapping(n, path, answerKeys), r.Type))
	})
	return r
}

// minHealthy accepts a count (2 or "2") or a share of the answers ("50%").
func (d *decoder) minHealthy(n *yaml.Node, path string) MinHealthy {
	s, ok := d.scalar(n, path, "a count or percentage")
	if !ok {
		return MinHealthy{}
	}
	num, isPercent := strings.CutSuffix(s, "%")
	v, err := strconv.Atoi(num)
	switch {
	case err != nil:
		d.errorf(n, path, "expected a count such as 2 or a percentage such as 50%%, got %q", s)
		return MinHealthy{}
	case isPercent:
		return MinHealthy{Percent: v}
	}
	return MinHealthy{Count: v}
}

// answer decodes an answer of a record of type typ: a CNAME's value is
// a name, any other's an address.
func (d *decoder) answer(f fields, typ uint16) Answer {
	a := Answer{Weight: 1}
	if n := f.get("value"); n != nil && typ == dns.TypeCNAME {
		if s, ok := d.scalar(n, f.key("value"), "a domain name"); ok {
			a.Target = dns.Fqdn(strings.ToLower(s))
		}
	} else if n != nil {
		if s, ok := d.scalar(n, f.key("value"), "an IP address"); ok {
			addr, err := netip.ParseAddr(s)
			if err != nil {
				d.errorf(n, f.key("value"), "invalid IP address %q", s)
			}
			a.Value = addr
		}
	}
	f.str("alias", &a.Alias)
	if a.Alias != "" {
		a.Alias = dns.Fqdn(strings.ToLower(a.Alias))
	}
	f.bool("evaluate_target_health", &a.EvaluateTargetHealth)
	f.str("check", &a.Check)
	uintField(f, "weight", &a.Weight)
	uintField(f, "priority", &a.Priority)
	f.bool("backup", &a.Backup)
	f.str("region", &a.Region)
	return a
}

func (d *decoder) aggregation(f fields) Aggregation {
	a := Aggregation{PushInterval: time.Second, Quorum: 0.18, StaleAfter: 10 * time.Second, TableSize: 65536}
	f.duration("push_interval", &a.PushInterval)
	f.percent("quorum", &a.Quorum)
	f.duration("stale_after", &a.StaleAfter)
	f.int("table_size", &a.TableSize)
	a.CheckerTimeout = 3 * a.PushInterval
	f.duration("checker_timeout", &a.CheckerTimeout)
	if f.has("hysteresis") {
		h := f.mapping("hysteresis", hysteresisKeys)
		a.Hysteresis = &Hysteresis{}
		h.percent("down", &a.Hysteresis.Down)
		h.percent("up", &a.Hysteresis.Up)
	}
	return a
}

// parseNSID reads server.nsid: text as its bytes, or hex:<digits> for any
// bytes, at most MaxNSID of them.
func parseNSID(v string) ([]byte, error) {
	b := []byte(v)
	if h, ok := strings.CutPrefix(v, "hex:"); ok {
		var err error
		if b, err = hex.DecodeString(h); err != nil {
			return nil, fmt.Errorf("invalid hex %q after hex:, want pairs of hex digits such as hex:0a01", h)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("hex: without a value; leave the key out to turn nsid off")
		}
	}
	if len(b) > MaxNSID {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxNSID)
	}
	return b, nil
}
