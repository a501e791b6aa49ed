package daemon

import (
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/geo"
	"github.com/steadydns/steadydns/controlplane/presign"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/selection"
)

// presignSets are the sets of p XDP answers signed: those of zones signed
// online, with every client region's ranking for geo sets.
func presignSets(p *Plan) ([]presign.Set, []selection.Ranks) {
	var sets []presign.Set
	for _, s := range p.Compiled.Sets {
		if s.Fallback || s.Value.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED) == 0 || int(s.Value.Zone) >= len(p.Zones) {
			continue
		}
		z := p.Zones[s.Value.Zone]
		if !z.Online() {
			continue // signed offline: the fallback serves the file's RRSIGs
		}
		sets = append(sets, presign.Set{Name: s.Name, Wire: records.Wire(s.Name), Type: s.Type, Value: &s.Value, Addrs: s.Addrs, Zone: z,
			NoData: func() []dns.RR { return z.NoData(s.Name, s.Type) }})
	}
	ranks := make([]selection.Ranks, geo.MaxRegions)
	for r := range ranks {
		ranks[r] = p.Geo.Ranks(uint8(r))
	}
	return sets, ranks
}
