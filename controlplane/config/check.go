package config

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	yaml "go.yaml.in/yaml/v3"

	"github.com/steadydns/steadydns/prober"
)

// checkKeys maps each check key to the types it applies to; nil means all.
// A key that does not apply is an error, since it would be silently ignored.
var checkKeys = map[string][]CheckType{
	"type": nil, "admin": nil, "cell": nil,
	// A calculated or external check has no probe result to invert.
	"invert": probedTypes,
	// A metric check asks its url, never a target.
	"target": targetTypes, "interval": probedTypes, "timeout": probedTypes,
	"unhealthy_threshold": probedTypes, "healthy_threshold": probedTypes,
	// Only a probed check has checkers whose regions could be chosen.
	"regions":            probedTypes,
	"port":               {CheckHTTP, CheckHTTPS, CheckTCP, CheckUDP, CheckDNS},
	"path":               {CheckHTTP, CheckHTTPS},
	"method":             {CheckHTTP, CheckHTTPS},
	"host":               {CheckHTTP, CheckHTTPS},
	"expect_status":      {CheckHTTP, CheckHTTPS},
	"expect_body":        {CheckHTTP, CheckHTTPS},
	"expect_body_regexp": {CheckHTTP, CheckHTTPS},
	"keepalive":          {CheckHTTP, CheckHTTPS},
	"sni":                {CheckHTTPS},
	"tls_verify":         {CheckHTTPS},
	"send":               {CheckTCP},
	"expect":             {CheckTCP},
	"expect_regexp":      {CheckTCP, CheckUDP},
	"payload":            {CheckUDP},
	"expect_reply":       {CheckUDP},
	"qname":              {CheckDNS},
	"qtype":              {CheckDNS},
	"expect_rcode":       {CheckDNS},
	"expect_answer":      {CheckDNS},
	"children":           {CheckCalculated},
	"min_healthy":        {CheckCalculated},
	"ttl":                {CheckExternal},
	"initial":            {CheckExternal},
	"url":                {CheckMetric},
	"query":              {CheckMetric},
	"insufficient_data":  {CheckMetric},
}

var checkKeyNames = slices.Sorted(maps.Keys(checkKeys))

func (d *decoder) check(id string, n *yaml.Node, path string) *Check {
	c := &Check{ID: id, Admin: "auto"}
	f := d.mapping(n, path, checkKeyNames)
	if n != nil && n.Kind != yaml.MappingNode {
		return c // mapping reported it
	}
	tn := f.get("type")
	if tn == nil {
		d.missing(f.key("type"), "required, one of %s", names(checkTypes))
		return c
	}
	s, ok := d.scalar(tn, f.key("type"), "a check type")
	if !ok {
		return c
	}
	t := CheckType(s)
	if !slices.Contains(checkTypes, t) {
		d.errorf(tn, f.key("type"), "unknown check type %q, want one of %s", s, names(checkTypes))
		return c
	}
	c.Type = t
	for _, k := range slices.Sorted(maps.Keys(f.vals)) {
		if types := checkKeys[k]; types != nil && !slices.Contains(types, t) {
			d.errorf(f.vals[k].keyNode, f.key(k), "does not apply to %s checks", t)
			delete(f.vals, k)
		}
	}

	if slices.Contains(probedTypes, t) {
		c.Interval = 10 * time.Second
		c.UnhealthyThreshold = 3
		c.HealthyThreshold = 3
	}
	switch t {
	case CheckHTTP, CheckHTTPS:
		c.Port = 80
		if t == CheckHTTPS {
			c.Port = 443
			c.TLSVerify = true
		}
		c.Path = "/"
		c.Method = "GET"
		c.ExpectStatus = []prober.StatusRange{{Lo: 200, Hi: 399}}
	case CheckDNS:
		c.Port = 53
		c.QType = dns.TypeA
	case CheckExternal:
		c.TTL = 30 * time.Second
	case CheckMetric:
		// A scrape missed or a Prometheus restarting should move nothing.
		c.InsufficientData = string(prober.InsufficientLastKnown)
	}

	f.str("target", &c.Target)
	uintField(f, "port", &c.Port)
	f.str("path", &c.Path)
	f.str("method", &c.Method)
	f.str("host", &c.Host)
	f.str("sni", &c.SNI)
	f.bool("tls_verify", &c.TLSVerify)
	f.bool("keepalive", &c.KeepAlive)
	if sn := f.get("expect_status"); sn != nil {
		c.ExpectStatus = d.statusRanges(sn, f.key("expect_status"))
	}
	f.str("expect_body", &c.ExpectBody)
	if rn := f.get("expect_body_regexp"); rn != nil {
		c.ExpectBodyRegexp = d.regexp(rn, f.key("expect_body_regexp"))
	}
	if sn := f.get("send"); sn != nil {
		c.Send = d.escaped(sn, f.key("send"))
	}
	f.str("expect", &c.Expect)
	if rn := f.get("expect_regexp"); rn != nil {
		c.ExpectRegexp = d.regexp(rn, f.key("expect_regexp"))
	}
	f.str("payload", &c.Payload)
	f.str("expect_reply", &c.ExpectReply)
	f.str("qname", &c.QName)
	if c.QName != "" {
		c.QName = dns.Fqdn(strings.ToLower(c.QName))
	}
	if qn := f.get("qtype"); qn != nil {
		c.QType = d.qtype(qn, f.key("qtype"))
	}
	if rn := f.get("expect_rcode"); rn != nil {
		c.ExpectRcode = d.rcode(rn, f.key("expect_rcode"))
	}
	f.str("expect_answer", &c.ExpectAnswer)
	f.str("url", &c.URL)
	f.str("query", &c.Query)
	f.str("insufficient_data", &c.InsufficientData)
	f.strs("children", &c.Children)
	c.MinHealthy = len(c.Children)
	f.int("min_healthy", &c.MinHealthy)
	f.duration("ttl", &c.TTL)
	if t == CheckExternal {
		c.Initial = "healthy"
	}
	f.str("initial", &c.Initial)
	f.duration("interval", &c.Interval)
	if slices.Contains(probedTypes, t) {
		// A default timeout longer than a short interval would turn the
		// default into an error the user never wrote.
		c.Timeout = min(2*time.Second, c.Interval)
	}
	f.duration("timeout", &c.Timeout)
	f.int("unhealthy_threshold", &c.UnhealthyThreshold)
	f.int("healthy_threshold", &c.HealthyThreshold)
	f.bool("invert", &c.Invert)
	f.str("admin", &c.Admin)
	f.str("cell", &c.Cell)
	f.strs("regions", &c.Regions)
	return c
}

// statusRanges accepts one status or a list, each a code (200) or a
// range ("200-399").
func (d *decoder) statusRanges(n *yaml.Node, path string) []prober.StatusRange {
	if n.Kind != yaml.SequenceNode {
		return []prober.StatusRange{d.statusRange(n, path)}
	}
	var out []prober.StatusRange
	d.list(n, path, false, func(p string, item *yaml.Node) {
		out = append(out, d.statusRange(item, p))
	})
	return out
}

func (d *decoder) statusRange(n *yaml.Node, path string) prober.StatusRange {
	s, ok := d.scalar(n, path, "a status code or range")
	if !ok {
		return prober.StatusRange{}
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	switch {
	case err1 != nil || err2 != nil:
		d.errorf(n, path, "expected a status code such as 200 or a range such as 200-399, got %q", s)
	case l < 100 || h > 599 || l > h:
		d.errorf(n, path, "status range %q must lie within 100-599, low end first", s)
	}
	return prober.StatusRange{Lo: l, Hi: h}
}

// regexp compiles while loading so that a bad pattern is reported at its
// line instead of failing every probe.
func (d *decoder) regexp(n *yaml.Node, path string) *regexp.Regexp {
	s, ok := d.scalar(n, path, "a regexp")
	if !ok {
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		d.errorf(n, path, "invalid regexp: %v", err)
	}
	return re
}

// escaped decodes \r, \n, \t, \\ and \xHH in s, so that a line protocol's
// terminator or a binary byte can be written in any YAML quoting: a double
// quoted string has YAML decode them first, leaving nothing to do here.
func (d *decoder) escaped(n *yaml.Node, path string) string {
	s, ok := d.scalar(n, path, "a string")
	if !ok {
		return ""
	}
	out, err := unescape(s)
	if err != nil {
		d.errorf(n, path, "%v", err)
	}
	return out
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New(`a lone \ ends the string; write \\ for a backslash`)
		}
		i++
		switch s[i] {
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '\\':
			b.WriteByte('\\')
		case 'x':
			if i+2 >= len(s) {
				return "", errors.New(`\x takes two hex digits, as in \x00`)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", errors.New(`\x takes two hex digits, as in \x00, got \x` + s[i+1:i+3])
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", errors.New(`unknown escape \` + string(s[i]) + `; use \r, \n, \t, \\ or \xHH`)
		}
	}
	return b.String(), nil
}

func (d *decoder) qtype(n *yaml.Node, path string) uint16 {
	s, ok := d.scalar(n, path, "a query type")
	if !ok {
		return 0
	}
	t, ok := dns.StringToType[strings.ToUpper(s)]
	if !ok {
		d.errorf(n, path, "unknown query type %q", s)
	}
	return t
}

// rcode accepts a name such as NXDOMAIN or a number.
func (d *decoder) rcode(n *yaml.Node, path string) int {
	s, ok := d.scalar(n, path, "an rcode")
	if !ok {
		return 0
	}
	if r, ok := dns.StringToRcode[strings.ToUpper(s)]; ok {
		return r
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 || r > 0xfff {
		d.errorf(n, path, "unknown rcode %q, want a name such as NXDOMAIN or a number from 0 to 4095", s)
	}
	return r
}
