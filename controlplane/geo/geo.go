// Package geo maps client addresses to regions and ranks the regions each
// client prefers, for the data plane's LPM tries and for the fallback.
package geo

import (
	"net/netip"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/selection"
)

// MaxRegions is the number of region ids the data plane ranks.
const MaxRegions = len(bpf.SteadydnsGeoOrder{}.Rank)

// Table is a compiled server.geo.
type Table struct {
	prefixes map[netip.Prefix]uint8 // masked prefix → region id
	lengths4 []int                  // IPv4 prefix lengths present, longest first
	lengths6 []int
	orders   []bpf.SteadydnsGeoOrder
}

// New compiles g; a nil g gives a table that matches nothing.
func New(g *config.Geo) *Table {
	t := &Table{prefixes: map[netip.Prefix]uint8{}, orders: make([]bpf.SteadydnsGeoOrder, MaxRegions)}
	if g == nil {
		return t
	}
	var seen4 [33]bool
	var seen6 [129]bool
	for i, r := range g.Regions {
		id := uint8(i + 1)
		for _, p := range r.Prefixes {
			t.prefixes[p] = id
			if p.Addr().Is4() {
				seen4[p.Bits()] = true
			} else {
				seen6[p.Bits()] = true
			}
		}
		// The client's own region first, then its next regions; every
		// other region shares the last rank.
		o := &t.orders[id]
		last := uint8(selection.GeoRanks - 1)
		for j := range o.Rank {
			o.Rank[j] = last
		}
		o.Rank[0] = 0
		o.Rank[id] = 0
		for k, n := range r.Next {
			if nid := g.RegionID(n); nid != 0 && nid != id && o.Rank[nid] == last {
				o.Rank[nid] = uint8(min(k+1, selection.GeoRanks-1))
			}
		}
	}
	for l := 128; l >= 0; l-- {
		if l <= 32 && seen4[l] {
			t.lengths4 = append(t.lengths4, l)
		}
		if seen6[l] {
			t.lengths6 = append(t.lengths6, l)
		}
	}
	return t
}

// Lookup finds the region of the longest prefix that contains addr and is
// no longer than maxBits (the ECS source prefix length, or the full
// address). It returns the region and the matched prefix length.
func (t *Table) Lookup(addr netip.Addr, maxBits int) (uint8, int, bool) {
	addr = addr.Unmap()
	lengths := t.lengths6
	if addr.Is4() {
		lengths = t.lengths4
	}
	for _, bits := range lengths {
		if bits > maxBits {
			continue
		}
		p, err := addr.Prefix(bits)
		if err != nil {
			continue
		}
		if id, ok := t.prefixes[p]; ok {
			return id, bits, true
		}
	}
	return 0, 0, false
}

// Ranks returns how a client of region id ranks candidate regions.
func (t *Table) Ranks(id uint8) selection.Ranks {
	o := &t.orders[int(id)%MaxRegions]
	return func(region uint8) uint8 { return o.Rank[int(region)%MaxRegions] }
}

// Entries lists the LPM entries for the data plane.
func (t *Table) Entries() (map[bpf.SteadydnsGeoKey4]bpf.SteadydnsGeoMatch, map[bpf.SteadydnsGeoKey6]bpf.SteadydnsGeoMatch) {
	v4 := map[bpf.SteadydnsGeoKey4]bpf.SteadydnsGeoMatch{}
	v6 := map[bpf.SteadydnsGeoKey6]bpf.SteadydnsGeoMatch{}
	for p, id := range t.prefixes {
		m := bpf.SteadydnsGeoMatch{Region: id, Prefixlen: uint8(p.Bits())}
		if p.Addr().Is4() {
			v4[bpf.SteadydnsGeoKey4{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As4()}] = m
		} else {
			v6[bpf.SteadydnsGeoKey6{Prefixlen: uint32(p.Bits()), Addr: p.Addr().As16()}] = m
		}
	}
	return v4, v6
}

// Orders are the per-client-region rankings, indexed by region id.
func (t *Table) Orders() []bpf.SteadydnsGeoOrder { return t.orders }
