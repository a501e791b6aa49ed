package config

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/prober"
)

type validator struct {
	c      *Config
	checks []*Check          // in file order
	byID   map[string]*Check // the same, by id
	errs   []*Error

	regionSeen map[string]bool // every region a check names, to cap them at MaxCheckerRegions
}

func (v *validator) errorf(key, format string, args ...any) {
	v.errs = append(v.errs, v.c.Errorf(key, format, args...))
}

// oneOf reports val unless it is one of the allowed values.
func oneOf[T ~string](v *validator, key string, val T, allowed ...T) {
	if !slices.Contains(allowed, val) {
		v.errorf(key, "unknown value %q, want one of %s", val, names(allowed))
	}
}

// validate checks what decoding cannot: ranges, references between
// sections and the files the config points at.
func (c *Config) validate(checks []*Check) []*Error {
	v := &validator{c: c, checks: checks, byID: make(map[string]*Check, len(checks))}
	for _, ch := range checks {
		v.byID[ch.ID] = ch
	}
	v.server()
	v.geo()
	v.zones()
	for _, ch := range checks {
		v.check(ch)
	}
	v.checkCycles()
	v.records()
	v.aggregation()
	v.cluster()
	v.notify()
	return v.errs
}

func (v *validator) server() {
	s := v.c.Server
	seen := map[string]int{}
	for i, name := range s.Interfaces {
		key := fmt.Sprintf("server.interfaces[%d]", i)
		// The kernel limits interface names to IFNAMSIZ-1 bytes.
		if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ ") {
			v.errorf(key, "invalid interface name %q", name)
		}
		if j, dup := seen[name]; dup {
			v.errorf(key, "duplicate interface %q, first at line %d", name, v.c.Line(fmt.Sprintf("server.interfaces[%d]", j)))
		}
		seen[name] = i
	}
	oneOf(v, "server.xdp_mode", s.XDPMode, "auto", "native", "generic")
	if len(s.Listen) == 0 {
		v.errorf("server.listen", "at least one address is required")
	}
	v.addrPorts("server.listen", s.Listen)
	if t := s.DoT; t != nil {
		if len(t.Listen) == 0 {
			v.errorf("server.tls.listen", "at least one address is required, such as 198.18.0.2:853")
		}
		v.addrPorts("server.tls.listen", t.Listen)
		for i, ap := range t.Listen {
			if j := slices.Index(s.Listen, ap); j >= 0 {
				v.errorf(fmt.Sprintf("server.tls.listen[%d]", i), "%s is server.listen[%d] too, whose TCP it would take; DNS over TLS wants a port of its own, 853", ap, j)
			}
		}
		v.keyPair("server.tls", t.Cert, t.Key)
	}
	if _, port, err := net.SplitHostPort(s.API); err != nil || !validPort(port) {
		v.errorf("server.api", "invalid address %q, want host:port such as 127.0.0.1:9153", s.API)
	}
	v.apiAccess()
	if !filepath.IsAbs(s.BPFFS) {
		v.errorf("server.bpffs", "must be an absolute path, got %q", s.BPFFS)
	}
	if !filepath.IsAbs(s.StateDir) {
		v.errorf("server.state_dir", "must be an absolute path, got %q", s.StateDir)
	}
	if s.MaxRecords < 1 || s.MaxRecords > maxRecords {
		v.errorf("server.max_records", "%d out of range 1-%d", s.MaxRecords, maxRecords)
	}
	if n := s.Debug.Name; n != "" {
		if _, ok := dns.IsDomainName(n); !ok || n == "." {
			v.errorf("server.debug.name", "%q is not a domain name", n)
		}
	}
	if d := s.Dnstap; d != nil {
		switch {
		case (d.Socket == "") == (d.TCP == ""):
			v.errorf("server.dnstap", "give one of socket and tcp")
		case d.TCP != "":
			if _, err := netip.ParseAddrPort(d.TCP); err != nil {
				v.errorf("server.dnstap.tcp", "%q is not an address and port such as 198.18.0.10:6000: %v", d.TCP, err)
			}
		}
		if d.Sample < 0 || d.Sample > MaxDnstapSample {
			v.errorf("server.dnstap.sample", "%d out of range 0-%d", d.Sample, MaxDnstapSample)
		}
	}
}

// apiAccess checks the API's tokens, names and TLS files. The files are
// read at start; check finds a missing or unreadable one first.
func (v *validator) apiAccess() {
	s := v.c.Server
	for _, f := range []struct{ key, path string }{{"server.api_token_file", s.APITokenFile}, {"server.api_read_token_file", s.APIReadTokenFile}} {
		if f.path != "" {
			if err := readable(f.path); err != nil {
				v.errorf(f.key, "%v", err)
			}
		}
	}
	if s.APIReadTokenFile != "" && s.APIReadTokenFile == s.APITokenFile {
		v.errorf("server.api_read_token_file", "is api_token_file too, so whoever may read could write; give the reads a token of their own")
	}
	for i, h := range s.APIHosts {
		if !hostName.MatchString(h) {
			v.errorf(fmt.Sprintf("server.api_hosts[%d]", i), "%q is not a host name; give a name without port or scheme, such as api.example.test", h)
		}
	}
	if t := s.APITLS; t != nil {
		v.keyPair("server.api_tls", t.Cert, t.Key)
	}
}

// keyPair checks the PEM files cert and key of the section at key: both
// given, readable, and a certificate with its key.
func (v *validator) keyPair(key, cert, priv string) {
	ok := true
	for _, f := range []struct{ key, path string }{{key + ".cert", cert}, {key + ".key", priv}} {
		switch err := readable(f.path); {
		case f.path == "":
			v.errorf(f.key, "required: a PEM file")
			ok = false
		case err != nil:
			v.errorf(f.key, "%v", err)
			ok = false
		}
	}
	if ok {
		if _, err := tls.LoadX509KeyPair(cert, priv); err != nil {
			v.errorf(key, "loading the certificate and key: %v", err)
		}
	}
}

// addrPorts checks the listen addresses at key: a port, no duplicates.
func (v *validator) addrPorts(key string, aps []netip.AddrPort) {
	for i, ap := range aps {
		k := fmt.Sprintf("%s[%d]", key, i)
		if ap.Port() == 0 {
			v.errorf(k, "port must not be 0")
		}
		if j := slices.Index(aps, ap); j < i {
			v.errorf(k, "duplicate listen address %s, first at line %d", ap, v.c.Line(fmt.Sprintf("%s[%d]", key, j)))
		}
	}
}

// hostName is a DNS host name: dot-separated labels of letters, digits
// and inner hyphens, with an optional final dot.
var hostName = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$`)

// maxRecords bounds server.max_records. The record table has a 128-byte
// slot per set and a quarter more, which the kernel reserves even when
// empty: 2.5 GiB at this bound.
const maxRecords = 1 << 24

func validPort(s string) bool {
	p, err := strconv.ParseUint(s, 10, 16)
	return err == nil && p > 0
}

func (v *validator) zones() {
	seen := map[string]int{}
	for i, z := range v.c.Zones {
		key := fmt.Sprintf("zones[%d]", i)
		switch _, ok := dns.IsDomainName(z.Origin); {
		case z.Origin == "":
			v.errorf(key+".origin", "required")
		case !ok:
			v.errorf(key+".origin", "invalid domain name %q", z.Origin)
		default:
			if j, dup := seen[z.Origin]; dup {
				v.errorf(key+".origin", "duplicate zone %q, first at line %d", z.Origin, v.c.Line(fmt.Sprintf("zones[%d].origin", j)))
			}
			seen[z.Origin] = i
		}
		if z.File == "" {
			v.errorf(key+".file", "required")
		} else if err := readable(z.File); err != nil {
			v.errorf(key+".file", "%v", err)
		}
		if s := z.DNSSEC; s != nil {
			if s.Keys == "" {
				v.errorf(key+".dnssec.keys", "required")
			}
			if !slices.Contains(DNSSECAlgorithms, s.Algorithm) {
				v.errorf(key+".dnssec.algorithm", "unknown algorithm %q, want one of %s", s.Algorithm, strings.Join(DNSSECAlgorithms, ", "))
			}
			v.dnssecTiming(key+".dnssec", s)
		}
	}
}

// dnssecTiming checks a zone's rollover waits. A TTL is whole seconds, and
// a ZSK must live longer than its own rollover takes.
func (v *validator) dnssecTiming(key string, s *DNSSEC) {
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"dnskey_ttl", s.DNSKEYTTL}, {"max_ttl", s.MaxTTL}, {"ds_ttl", s.DSTTL}} {
		if t.d < time.Second || t.d%time.Second != 0 || t.d > math.MaxInt32*time.Second {
			v.errorf(key+"."+t.name, "must be whole seconds, from 1s to 68 years, got %s", t.d)
		}
	}
	if s.Propagation < 0 {
		v.errorf(key+".propagation", "must not be negative, got %s", s.Propagation)
	}
	switch roll := s.DNSKEYTTL + s.MaxTTL + 2*s.Propagation; {
	case s.ZSKLifetime == 0:
	case !s.Split:
		v.errorf(key+".zsk_lifetime", "needs split: true; a CSK has no ZSK to roll")
	case s.ZSKLifetime <= roll:
		v.errorf(key+".zsk_lifetime", "must exceed a ZSK rollover, dnskey_ttl + max_ttl + 2 × propagation = %s, got %s", roll, s.ZSKLifetime)
	}
}

// readable checks a zone file up front, so a typo in its path is reported
// with the config's line instead of later by the zone parser.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

var httpMethod = regexp.MustCompile(`^[A-Z]+$`)

func (v *validator) check(c *Check) {
	key := func(k string) string { return "health_checks." + c.ID + "." + k }
	if c.Target != "" && !validHost(c.Target) {
		v.errorf(key("target"), "invalid target %q, want an IP address or hostname without a port", c.Target)
	}
	switch c.Type {
	case CheckTCP, CheckUDP:
		if c.Port == 0 && v.c.Line(key("port")) == 0 {
			v.errorf(key("port"), "required for %s checks", c.Type)
			break
		}
		fallthrough
	case CheckHTTP, CheckHTTPS, CheckDNS:
		if c.Port == 0 {
			v.errorf(key("port"), "must not be 0")
		}
	}
	switch c.Type {
	case CheckHTTP, CheckHTTPS:
		if !strings.HasPrefix(c.Path, "/") {
			v.errorf(key("path"), "must start with /, got %q", c.Path)
		}
		if !httpMethod.MatchString(c.Method) {
			v.errorf(key("method"), "invalid HTTP method %q", c.Method)
		}
		if c.SNI != "" && !validHost(c.SNI) {
			v.errorf(key("sni"), "invalid hostname %q", c.SNI)
		}
		if len(c.ExpectStatus) == 0 {
			v.errorf(key("expect_status"), "at least one status is required")
		}
		if c.ExpectBody != "" && c.ExpectBodyRegexp != nil {
			v.errorf(key("expect_body_regexp"), "set expect_body or expect_body_regexp, not both")
		}
	case CheckTCP:
		if c.Expect != "" && c.ExpectRegexp != nil {
			v.errorf(key("expect_regexp"), "set expect or expect_regexp, not both")
		}
	case CheckUDP:
		if c.Payload == "" {
			v.errorf(key("payload"), "required for udp checks")
		}
		if c.ExpectReply != "" && c.ExpectRegexp != nil {
			v.errorf(key("expect_regexp"), "set expect_reply or expect_regexp, not both")
		}
	case CheckDNS:
		if _, ok := dns.IsDomainName(c.QName); !ok || c.QName == "" {
			v.errorf(key("qname"), "a domain name is required for dns checks, got %q", c.QName)
		}
	case CheckMetric:
		v.metric(c, key)
	case CheckCalculated:
		v.children(c, key)
	case CheckExternal:
		if c.TTL <= 0 {
			v.errorf(key("ttl"), "must be positive, got %s", c.TTL)
		}
	}
	if slices.Contains(probedTypes, c.Type) {
		switch {
		case c.Interval < 100*time.Millisecond:
			v.errorf(key("interval"), "%s is below the minimum of 100ms", c.Interval)
		case c.Timeout <= 0:
			v.errorf(key("timeout"), "must be positive, got %s", c.Timeout)
		case c.Timeout > c.Interval:
			v.errorf(key("timeout"), "%s exceeds interval %s", c.Timeout, c.Interval)
		}
		v.threshold(key("unhealthy_threshold"), c.UnhealthyThreshold)
		v.threshold(key("healthy_threshold"), c.HealthyThreshold)
		v.regions(c, key)
	}
	oneOf(v, key("admin"), c.Admin, "auto", "up", "down")
	if c.Type == CheckExternal {
		oneOf(v, key("initial"), c.Initial, "healthy", "unhealthy")
	}
}

func (v *validator) metric(c *Check, key func(string) string) {
	if c.URL == "" {
		v.errorf(key("url"), "required for metric checks: the base URL of a Prometheus-compatible API, such as http://198.18.1.2:9090")
	} else if _, err := prober.MetricURL(c.URL); err != nil {
		v.errorf(key("url"), "%v", err)
	}
	if strings.TrimSpace(c.Query) == "" {
		v.errorf(key("query"), "required for metric checks: a PromQL expression")
	}
	oneOf(v, key("insufficient_data"), prober.Insufficient(c.InsufficientData), prober.Insufficients...)
}

// MinCheckerRegions is the fewest checker regions a check may name: as with
// Route 53, fewer would let one region's outage decide the check alone.
const MinCheckerRegions = 3

// MaxCheckerRegions is how many distinct regions all checks together may name:
// an aggregator keeps a check's regions as a 64-bit mask.
const MaxCheckerRegions = 64

func (v *validator) regions(c *Check, key func(string) string) {
	if v.c.Line(key("regions")) == 0 && len(c.Regions) == 0 {
		return
	}
	for i, r := range c.Regions {
		k := fmt.Sprintf("%s[%d]", key("regions"), i)
		if len(r) < 1 || len(r) > 32 {
			v.errorf(k, "region %q must be 1-32 bytes", r)
		}
		if j := slices.Index(c.Regions, r); j < i {
			v.errorf(k, "duplicate region %q, first at line %d", r, v.c.Line(fmt.Sprintf("%s[%d]", key("regions"), j)))
		}
	}
	if n := distinct(c.Regions); n < MinCheckerRegions {
		v.errorf(key("regions"), "%d distinct regions, at least %d are required", n, MinCheckerRegions)
	}
	for _, r := range c.Regions {
		if !v.regionSeen[r] {
			if v.regionSeen == nil {
				v.regionSeen = map[string]bool{}
			}
			v.regionSeen[r] = true
			if len(v.regionSeen) == MaxCheckerRegions+1 {
				v.errorf(key("regions"), "more than %d distinct regions across health_checks", MaxCheckerRegions)
			}
		}
	}
}

func distinct(ss []string) int {
	n := 0
	for i, s := range ss {
		if slices.Index(ss, s) == i {
			n++
		}
	}
	return n
}

func (v *validator) threshold(key string, n int) {
	if n < 1 || n > 10 {
		v.errorf(key, "%d out of range 1-10", n)
	}
}

// validHost accepts an IP address or a hostname. miekg/dns accepts nearly
// any text as a name, so ports and URLs are ruled out explicitly.
func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	_, ok := dns.IsDomainName(s)
	return ok && !strings.ContainsAny(s, ":/@ ")
}

func (v *validator) children(c *Check, key func(string) string) {
	if len(c.Children) == 0 {
		v.errorf(key("children"), "at least one child is required")
		return
	}
	for i, child := range c.Children {
		k := fmt.Sprintf("%s[%d]", key("children"), i)
		if _, ok := v.byID[child]; !ok {
			v.errorf(k, "unknown health check %q", child)
		}
		if j := slices.Index(c.Children, child); j < i {
			v.errorf(k, "duplicate child %q", child)
		}
	}
	if c.MinHealthy < 1 || c.MinHealthy > len(c.Children) {
		v.errorf(key("min_healthy"), "%d out of range 1-%d (the number of children)", c.MinHealthy, len(c.Children))
	}
}

// checkCycles rejects calculated checks that depend on themselves, which
// would never settle. Each cycle is reported once, at the reference that
// closes it.
func (v *validator) checkCycles() {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(id string)
	visit = func(id string) {
		state[id] = visiting
		stack = append(stack, id)
		for i, child := range v.byID[id].Children {
			switch state[child] {
			case visiting:
				cycle := append(slices.Clone(stack[slices.Index(stack, child):]), child)
				v.errorf(fmt.Sprintf("health_checks.%s.children[%d]", id, i), "cycle %s", strings.Join(cycle, " -> "))
			case unvisited:
				if _, ok := v.byID[child]; ok {
					visit(child)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
	}
	for _, c := range v.checks {
		if state[c.ID] == unvisited {
			visit(c.ID)
		}
	}
}

func (v *validator) records() {
	type nameType struct {
		name string
		typ  uint16
	}
	seen := map[nameType]int{}
	for i, r := range v.c.Records {
		key := func(k string) string { return fmt.Sprintf("records[%d].%s", i, k) }
		switch _, ok := dns.IsDomainName(r.Name); {
		case r.Name == "":
			v.errorf(key("name"), "required")
		case !ok:
			v.errorf(key("name"), "invalid domain name %q", r.Name)
		case !v.inZone(r.Name):
			v.errorf(key("name"), "%s is not inside any zone in zones", r.Name)
		}
		if r.Type == 0 {
			v.errorf(key("type"), "required, A, AAAA or CNAME")
		} else if r.Name != "" {
			nt := nameType{r.Name, r.Type}
			if j, dup := seen[nt]; dup {
				v.errorf(key("name"), "duplicate record %s %s, first at line %d", r.Name, dns.TypeToString[r.Type], v.c.Line(fmt.Sprintf("records[%d].name", j)))
			} else {
				seen[nt] = i
			}
		}
		// RFC 2181 §8: resolvers treat TTLs with the top bit set as 0.
		if r.TTL > math.MaxInt32 {
			v.errorf(key("ttl"), "%d exceeds %d", r.TTL, math.MaxInt32)
		}
		if r.TTLDegraded > r.TTL {
			v.errorf(key("ttl_degraded"), "%d exceeds ttl %d", r.TTLDegraded, r.TTL)
		}
		oneOf(v, key("policy"), r.Policy, policies...)
		oneOf(v, key("when_all_down"), r.WhenAllDown, whenAllDowns...)
		oneOf(v, key("stale_policy"), r.Stale, stalePolicies...)
		if r.MaxAnswers < 1 || r.MaxAnswers > MaxAnswers {
			v.errorf(key("max_answers"), "%d out of range 1-%d", r.MaxAnswers, MaxAnswers)
		}
		v.answers(r, key)
		if r.Type == dns.TypeCNAME {
			v.cname(i, r, key)
		}
	}
	v.aliases()
}

func (v *validator) inZone(name string) bool {
	return slices.ContainsFunc(v.c.Zones, func(z Zone) bool { return dns.IsSubDomain(z.Origin, name) })
}

func (v *validator) answers(r Record, key func(string) string) {
	switch n := len(r.Answers); {
	case n == 0:
		v.errorf(key("answers"), "at least one answer is required")
	case n > MaxCandidates:
		v.errorf(key("answers"), "record has %d answers, at most %d are allowed", n, MaxCandidates)
	}
	if len(r.Answers) > 0 && !slices.ContainsFunc(r.Answers, func(a Answer) bool { return !a.Backup }) {
		v.errorf(key("answers"), "every answer is a backup: at least one must not be")
	}
	switch mh := r.MinHealthy; {
	case mh.Count < 0 || mh.Count > len(r.Answers):
		v.errorf(key("min_healthy"), "%d out of range 0-%d (the number of answers)", mh.Count, len(r.Answers))
	case mh.Percent < 0 || mh.Percent > 100:
		v.errorf(key("min_healthy"), "%d%% out of range 0-100%%", mh.Percent)
	}
	for j, a := range r.Answers {
		ak := func(k string) string { return fmt.Sprintf("%s[%d].%s", key("answers"), j, k) }
		switch {
		case r.Type == dns.TypeCNAME:
			v.cnameTarget(r, j, key)
		case a.Alias != "":
			v.alias(r, j, key)
		case a.EvaluateTargetHealth:
			v.errorf(ak("evaluate_target_health"), "applies to an alias only")
		case !a.Value.IsValid():
			v.errorf(ak("value"), "required: an address, or alias: a name")
		case a.Value.Zone() != "":
			v.errorf(ak("value"), "address %s must not have a zone", a.Value)
		case r.Type == dns.TypeA && !a.Value.Is4():
			v.errorf(ak("value"), "%s is not an IPv4 address, as type A needs", a.Value)
		case r.Type == dns.TypeAAAA && !a.Value.Is6():
			v.errorf(ak("value"), "%s is not an IPv6 address, as type AAAA needs", a.Value)
		default:
			if k := slices.IndexFunc(r.Answers, func(b Answer) bool { return b.Value == a.Value }); k < j {
				v.errorf(ak("value"), "duplicate answer %s, first at line %d", a.Value, v.c.Line(fmt.Sprintf("%s[%d].value", key("answers"), k)))
			}
		}
		if _, ok := v.byID[a.Check]; a.Check != "" && !ok {
			v.errorf(ak("check"), "unknown health check %q", a.Check)
		}
		if a.Region != "" && v.c.Server.Geo.RegionID(a.Region) == 0 {
			v.errorf(ak("region"), "unknown region %q: define it under server.geo.regions", a.Region)
		}
	}
}

func (v *validator) aggregation() {
	a := v.c.Aggregation
	if a.PushInterval < 50*time.Millisecond {
		v.errorf("aggregation.push_interval", "%s is below the minimum of 50ms", a.PushInterval)
	}
	if a.Quorum < 0 || a.Quorum >= 1 {
		v.errorf("aggregation.quorum", "%g%% out of range 0-99.99%%", a.Quorum*100)
	}
	switch {
	case a.StaleAfter < 0:
		v.errorf("aggregation.stale_after", "must not be negative, got %s", a.StaleAfter)
	case a.StaleAfter > 0 && a.StaleAfter <= a.PushInterval:
		// Tables arrive once per push interval, so anything shorter would
		// call every table stale just before the next one arrives.
		v.errorf("aggregation.stale_after", "%s must be longer than push_interval %s (or 0 for never)", a.StaleAfter, a.PushInterval)
	}
	if a.CheckerTimeout < a.PushInterval {
		// Frames arrive once per push interval: a shorter timeout would
		// drop every checker between two frames.
		v.errorf("aggregation.checker_timeout", "%s must be at least push_interval %s", a.CheckerTimeout, a.PushInterval)
	}
	if a.TableSize < 16 || a.TableSize > 1<<22 || a.TableSize&(a.TableSize-1) != 0 {
		v.errorf("aggregation.table_size", "%d is not a power of two from 16 to %d", a.TableSize, 1<<22)
	} else if n := len(v.checks); n > a.TableSize {
		v.errorf("aggregation.table_size", "%d health checks do not fit in %d entries", n, a.TableSize)
	}
	if h := a.Hysteresis; h != nil {
		const key = "aggregation.hysteresis"
		missing := false
		for _, k := range []string{"down", "up"} {
			if v.c.Line(key+"."+k) == 0 {
				v.errorf(key+"."+k, "required")
				missing = true
			}
		}
		if !missing && (h.Down < 0 || h.Up > 1 || h.Down >= h.Up) {
			v.errorf(key, "want 0%% <= down < up <= 100%%, got down %g%% and up %g%%", h.Down*100, h.Up*100)
		}
		// The hysteresis replaces the quorum: a quorum beside it would
		// be read and then never used.
		if v.c.Line("aggregation.quorum") != 0 {
			v.errorf("aggregation.quorum", "hysteresis replaces the quorum: give one or the other, not both")
		}
	}
}
