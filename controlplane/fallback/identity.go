package fallback

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Debug is the debug TXT name: <record name>.<Name> TXT, in class IN or
// CH, explains the record set's health to the clients in Allow.
type Debug struct {
	Name  string // fully qualified, lowercase; empty turns it off
	Allow []netip.Prefix
	// Explain returns the TXT strings for a record set's name (lowercase
	// fqdn), or for the root name when the query names none: the table
	// first, then each candidate.
	Explain func(name string) []string
}

// The CH TXT names of RFC 4892 and their BIND spellings.
var (
	idNames      = map[string]bool{"id.server.": true, "hostname.bind.": true}
	versionNames = map[string]bool{"version.server.": true, "version.bind.": true}
)

// txtMax is the longest character-string in a TXT record (RFC 1035 §3.3).
const txtMax = 255

// identity answers the names about the server itself: id.server and
// version.server in class CH, and the debug name. ok is false for every
// other query, which the zones answer.
func (s *Server) identity(m *dns.Msg, q dns.Question, client netip.Addr) (rcode int, outcome string, ok bool) {
	// The name is lowercased only for the rare query that is about the
	// server, so other queries allocate nothing here.
	if d := &s.opts.Debug; d.Name != "" && (q.Qclass == dns.ClassINET || q.Qclass == dns.ClassCHAOS) && under(q.Name, d.Name) {
		name := strings.ToLower(q.Name)
		if !allowed(d.Allow, client) {
			return dns.RcodeRefused, OutcomeRefused, true
		}
		if q.Qtype != dns.TypeTXT {
			m.Authoritative = true
			return dns.RcodeSuccess, OutcomeNoData, true
		}
		record := "."
		if name != d.Name {
			record = name[:len(name)-len(d.Name)]
		}
		m.Authoritative = true
		m.Answer = []dns.RR{txt(q, d.Explain(record))}
		return dns.RcodeSuccess, OutcomeNoError, true
	}
	if q.Qclass != dns.ClassCHAOS {
		return 0, "", false
	}
	name := strings.ToLower(q.Name)
	var value string
	switch {
	case idNames[name]:
		value = s.opts.ID
	case versionNames[name]:
		value = s.opts.Version
	}
	switch {
	case value == "":
		return dns.RcodeRefused, OutcomeRefused, true
	case q.Qtype != dns.TypeTXT:
		m.Authoritative = true
		return dns.RcodeSuccess, OutcomeNoData, true
	}
	m.Authoritative = true
	m.Answer = []dns.RR{txt(q, []string{value})}
	return dns.RcodeSuccess, OutcomeNoError, true
}

// txt is a TXT record for q holding each string, cut to what a
// character-string holds. TTL 0: the answer is about this moment.
func txt(q dns.Question, strs []string) *dns.TXT {
	out := make([]string, len(strs))
	for i, s := range strs {
		if len(s) > txtMax {
			s = s[:txtMax]
		}
		out[i] = s
	}
	return &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: q.Qclass}, Txt: out}
}

func allowed(allow []netip.Prefix, client netip.Addr) bool {
	for _, p := range allow {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

// under reports whether name is parent or below it, ignoring ASCII case;
// parent is lowercase. dns.IsSubDomain says the same but allocates the
// labels' offsets, on every query.
func under(name, parent string) bool {
	if len(name) < len(parent) {
		return false
	}
	at := len(name) - len(parent)
	for i := range len(parent) {
		c := name[at+i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != parent[i] {
			return false
		}
	}
	if at == 0 {
		return true
	}
	// The suffix starts a label: a dot before it that no backslash escapes.
	if name[at-1] != '.' {
		return false
	}
	escapes := 0
	for i := at - 2; i >= 0 && name[i] == '\\'; i-- {
		escapes++
	}
	return escapes%2 == 0
}
