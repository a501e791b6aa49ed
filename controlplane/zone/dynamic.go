package zone

import (
	"fmt"
	"iter"
	"strings"

	"github.com/miekg/dns"
)

// MarkDynamic declares that name has an A, AAAA or CNAME set served from
// elsewhere: the health-checked records of the config. The name then
// exists in the zone, and Lookup returns Dynamic for it. Call it before the
// zone serves lookups; it is not safe alongside them.
//
// The set must be one the data plane can answer (see DataPlaneSets):
// inside the zone, above any zone cut, not below a DNAME, not at a CNAME
// or wildcard owner, and not also in the zone file. A CNAME's name holds
// nothing else (RFC 1034 §3.6.2): not the apex, no data in the file.
func (z *Zone) MarkDynamic(name string, qtype uint16) error {
	key := lower(dns.Fqdn(name))
	what := key + " " + dns.TypeToString[qtype]
	switch {
	case qtype != dns.TypeA && qtype != dns.TypeAAAA && qtype != dns.TypeCNAME:
		return fmt.Errorf("%s: only A, AAAA and CNAME sets can be dynamic", what)
	case !dns.IsSubDomain(z.origin, key):
		return fmt.Errorf("%s: outside the zone %s", what, z.origin)
	case strings.HasPrefix(key, "*."):
		return fmt.Errorf("%s: a wildcard owner cannot be dynamic", what)
	case !z.authoritative(key):
		return fmt.Errorf("%s: at or below a zone cut, or below a DNAME", what)
	}
	if n := z.nodes[key]; n != nil {
		switch {
		case qtype == dns.TypeCNAME && len(n.sets) > 0:
			return fmt.Errorf("%s: the zone file has data at the name, which a CNAME must hold alone", what)
		case n.dynamic[dns.TypeCNAME]:
			return fmt.Errorf("%s: the name has a CNAME", what)
		case qtype == dns.TypeCNAME && len(n.dynamic) > 0:
			return fmt.Errorf("%s: the name has other records, which a CNAME must hold alone", what)
		case n.sets.get(dns.TypeCNAME) != nil:
			return fmt.Errorf("%s: the name has a CNAME", what)
		case n.sets.get(qtype) != nil:
			return fmt.Errorf("%s: the zone file has this set too", what)
		case n.dynamic[qtype]:
			return fmt.Errorf("%s: already dynamic", what)
		}
	}
	n := z.node(key)
	if n.dynamic == nil {
		n.dynamic = make(map[uint16]bool)
	}
	n.dynamic[qtype] = true
	return nil
}

// Set is an A or AAAA record set of a zone file.
type Set struct {
	Name string // lowercase fqdn
	Type uint16
	TTL  uint32
	RRs  []dns.RR // zone-file order; shared with the zone, do not modify
}

// DataPlaneSets lists every A and AAAA set of the zone file that the XDP
// program may answer: authoritative, so not glue nor anything at or below
// a zone cut, not below a DNAME, and not owned by a wildcard, whose answers
// are synthesised. Sets come sorted by name, A before AAAA, one at a time:
// a zone may hold millions.
func (z *Zone) DataPlaneSets() iter.Seq[Set] {
	return func(yield func(Set) bool) {
		for _, key := range z.names() {
			if strings.HasPrefix(key, "*.") || !z.authoritative(key) {
				continue
			}
			n := z.nodes[key]
			for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
				if rrs := n.sets.get(t); rrs != nil && !yield(Set{Name: key, Type: t, TTL: rrs[0].Header().Ttl, RRs: rrs}) {
					return
				}
			}
		}
	}
}
