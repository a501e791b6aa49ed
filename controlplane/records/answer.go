package records

import (
	"math/rand/v2"
	"net/netip"
	"sync/atomic"

	"github.com/steadydns/steadydns/controlplane/fallback"
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
	turn atomic.Uint32 // round-robin turn, as XDP's per-CPU counter
}

// NewAnswerer answers from c and h.
func NewAnswerer(c *Compiled, h Health) *Answerer { return &Answerer{c: c, h: h} }

// Select implements fallback.Records.
func (a *Answerer) Select(name string, qtype uint16, q fallback.Query) (fallback.Selection, bool) {
	s := a.c.Lookup(name, qtype)
	if s == nil {
		return fallback.Selection{}, false
	}
	v := &s.Value
	p := selection.Select(v, a.h.Up, a.h.Open(v.Stale), rand.Uint32(), a.turn.Add(1)-1)
	out := fallback.Selection{TTL: v.Ttl}
	if p.Degraded && v.TtlDegraded != 0 {
		out.TTL = v.TtlDegraded
	}
	switch p.Action {
	case selection.NoData:
		out.Action = fallback.NoData
	case selection.ServFail:
		out.Action = fallback.ServFail
	default:
		out.Action = fallback.Answer
		out.Addrs = make([]netip.Addr, 0, len(p.Order))
		for _, j := range p.Order {
			out.Addrs = append(out.Addrs, s.Addrs[j])
		}
	}
	return out, true
}
