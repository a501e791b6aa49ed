package records

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/miekg/dns"

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
// the health table, with the XDP program's selection: nested for a set
// with alias answers, with one target for a CNAME set.
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
	var buf bpf.Set
	v := s.Data(&buf)
	var ranks selection.Ranks
	var scope uint8
	if steered(s) || slices.ContainsFunc(s.aliases(), steered) {
		ranks, scope = a.steer(q)
	}
	var order [selection.K]int
	p := a.pick(s, v, ranks, order[:0])
	out := fallback.Selection{Action: p.Action, TTL: p.TTL(v), ECSScope: scope}
	switch {
	case p.Action != selection.Answer:
	case s.Type == dns.TypeCNAME:
		out.Target = s.rec.targets[p.Order[0]] // max_answers 1
	case s.aliases() != nil:
		var degraded bool
		out.Addrs, degraded = a.nest(s, v, p, ranks, into[:0])
		if degraded && v.TtlDegraded != 0 {
			out.TTL = v.TtlDegraded
		}
		if len(out.Addrs) == 0 {
			out.Action = selection.NoData
		}
	default:
		out.Addrs = into[:0]
		for _, j := range p.Order {
			out.Addrs = append(out.Addrs, s.addr(j))
		}
	}
	return out, true
}

func steered(s *Set) bool {
	return s != nil && s.rec != nil && s.rec.value.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_GEO) != 0 // a static set never is
}

// pick runs the data plane's selection on s, whose data-plane set is v,
// steered by ranks if s is geo-steered.
func (a *Answerer) pick(s *Set, v *bpf.Set, ranks selection.Ranks, into []int) selection.Pick {
	if !steered(s) {
		ranks = nil
	}
	return selection.Select(v, a.h.Up, ranks, a.h.Open(v.Stale), rand.Uint32(), a.turn.Add(1)-1, into)
}

// nest answers the candidates p chose of s, whose data-plane set is v, an
// alias answer with what its target selects now: its addresses in the
// target's order, each once, up to s's max_answers. A target that answers NODATA or SERVFAIL adds
// nothing. degraded is whether ttl_degraded applies: a candidate of s or
// of a chosen target is down.
func (a *Answerer) nest(s *Set, v *bpf.Set, p selection.Pick, ranks selection.Ranks, out []netip.Addr) (_ []netip.Addr, degraded bool) {
	limit := int(v.MaxAnswers)
	var buf bpf.Set // a static target's data-plane set
	add := func(x netip.Addr) {
		if len(out) < limit && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	degraded = p.Degraded
	for _, j := range p.Order {
		t := s.rec.aliases[j]
		if t == nil {
			add(s.addr(j))
			continue
		}
		var order [selection.K]int
		tp := a.pick(t, t.Data(&buf), ranks, order[:0])
		degraded = degraded || tp.Degraded
		if tp.Action == selection.Answer {
			for _, k := range tp.Order {
				add(t.addr(k))
			}
		}
	}
	return out, degraded
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
