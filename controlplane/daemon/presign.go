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
	var buf bpf.Set
	for _, s := range p.Compiled.Sets {
		v := s.Data(&buf)
		if s.Fallback || v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED) == 0 || int(v.Zone) >= len(p.Zones) {
			continue
		}
		z := p.Zones[v.Zone]
		if !z.Online() {
			continue // signed offline: the fallback serves the file's RRSIGs
		}
		if v == &buf {
			v = s.Data(new(bpf.Set)) // a static set's, built: presign keeps it
		}
		sets = append(sets, presign.Set{Name: s.Name, Wire: records.Wire(s.Name), Type: s.Type, Value: v, Addrs: s.Addrs(), Zone: z,
			NoData: func() []dns.RR { return z.NoData(s.Name, s.Type) }})
	}
	ranks := make([]selection.Ranks, geo.MaxRegions)
	for r := range ranks {
		ranks[r] = p.Geo.Ranks(uint8(r))
	}
	return sets, ranks
}
