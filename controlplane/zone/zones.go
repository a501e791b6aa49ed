package zone

import (
	"iter"
	"maps"

	"github.com/miekg/dns"
)

// Zones is the set of zones one server is authoritative for.
type Zones struct {
	byOrigin map[string]*Zone
}

// NewZones collects zs. Origins are unique; for a repeated one the last wins.
func NewZones(zs ...*Zone) *Zones {
	s := &Zones{byOrigin: make(map[string]*Zone, len(zs))}
	for _, z := range zs {
		s.byOrigin[z.origin] = z
	}
	return s
}

// Find returns the zone with the longest origin that qname is at or below,
// ignoring case, or nil if there is none.
func (s *Zones) Find(qname string) *Zone {
	if s == nil {
		return nil
	}
	key := lower(dns.Fqdn(qname))
	for off, end := 0, false; !end; off, end = dns.NextLabel(key, off) {
		if z := s.byOrigin[key[off:]]; z != nil {
			return z
		}
	}
	return s.byOrigin["."]
}

// All yields every zone, in no particular order.
func (s *Zones) All() iter.Seq[*Zone] {
	if s == nil {
		return func(func(*Zone) bool) {}
	}
	return maps.Values(s.byOrigin)
}
