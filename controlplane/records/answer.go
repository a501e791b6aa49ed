package records

import (
	"math/rand/v2"
	"net/netip"
	"sync/atomic"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/geo"
	"github.com/steadydns/steadydns/controlplane/selection"
)

// Health is the health table as the data plane sees it.
type Health interface {
	// Up reports the state of a table entry.
	Up(index uint32) bool
	// Open reports whether a record with this stale policy answers every
	// candidate now: no table yet, or a stale one under answer_all.
	Open(stale uint8) bool
}

// Answerer answers the fallback's dynamic sets from the compiled sets and
// the health table, with the XDP program's selection.
type Answerer struct {
	c    *Compiled
	h    Health
	g    *geo.Table
	turn atomic.Uint32 // round-robin turn, as XDP's per-CPU counter
}

// NewAnswerer answers from c, h and g.
func NewAnswerer(c *Compiled, h Health, g *geo.Table) *Answerer {
	return &Answerer{c: c, h: h, g: g}
}

// Select implements fallback.Records.
func (a *Answerer) Select(name string, qtype uint16, q fallback.Query, into []netip.Addr) (fallback.Selection, bool) {
	s := a.c.Lookup(name, qtype)
	if s == nil {
		return fallback.Selection{}, false
	}
	v := &s.Value
	var ranks selection.Ranks
	var scope uint8
	if v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_GEO) != 0 {
		ranks, scope = a.steer(q)
	}
	var order [selection.K]int
	p := selection.Select(v, a.h.Up, ranks, a.h.Open(v.Stale), rand.Uint32(), a.turn.Add(1)-1, order[:0])
	out := fallback.Selection{Action: p.Action, TTL: p.TTL(v), ECSScope: scope}
	if p.Action == selection.Answer {
		out.Addrs = into[:0]
		for _, j := range p.Order {
			out.Addrs = append(out.Addrs, s.Addrs[j])
		}
	}
	return out, true
}

// steer ranks regions for the client: by its EDNS Client Subnet when the
// query has one (RFC 7871), else by its address, as XDP does. The scope is
// the length of the prefix that decided, or the source prefix length when
// none did.
func (a *Answerer) steer(q fallback.Query) (selection.Ranks, uint8) {
	if ecs := q.ECS; ecs != nil {
		addr, ok := netip.AddrFromSlice(ecs.Address)
		if ok && ecs.Family == 1 {
			addr = addr.Unmap()
		}
		region, bits, found := a.g.Lookup(addr, int(ecs.SourceNetmask))
		if !found {
			bits = int(ecs.SourceNetmask)
		}
		return a.g.Ranks(region), uint8(bits)
	}
	region, _, _ := a.g.Lookup(q.Client, 128)
	return a.g.Ranks(region), 0
}
