package records

import (
	"fmt"
	"slices"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
)

// resolveAliases points every alias answer at its target set, which the
// config has checked holds no alias itself. A set whose one answer is an
// alias, without a check or region of its own, answers exactly what its
// target does at every health: it becomes a copy of the target (same
// candidates, checks and policy) under its own name, TTLs and zone, and
// XDP answers it. With evaluate_target_health that holds only while
// when_all_down is answer_all: otherwise the alias's own when_all_down
// decides when the target is down. Any other set with an alias nests the
// target's selection in its own, which XDP does not do: it stays with the
// fallback.
func (c *Compiled) resolveAliases(cfg *config.Config) error {
	for i, r := range cfg.Records {
		if r.Type == dns.TypeCNAME || !slices.ContainsFunc(r.Answers, func(a config.Answer) bool { return a.Alias != "" }) {
			continue
		}
		s := c.Lookup(r.Name, r.Type)
		targets := make([]*Set, len(r.Answers))
		for j, a := range r.Answers {
			if a.Alias == "" {
				continue
			}
			if targets[j] = c.Lookup(a.Alias, r.Type); targets[j] == nil {
				return cfg.Errorf(fmt.Sprintf("records[%d].answers[%d].alias", i, j), "%s has no %s set in records or the zone files to alias", a.Alias, dns.TypeToString[r.Type])
			}
		}
		a := r.Answers[0]
		if len(r.Answers) == 1 && a.Check == "" && a.Region == "" && (!a.EvaluateTargetHealth || r.WhenAllDown == config.WhenAllDownAnswerAll) {
			s.copyOf(targets[0])
			continue
		}
		s.Fallback = true
		s.rec.aliases = targets
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s %s nests the selection of an alias's target in its own, which XDP does not do: the fallback answers it",
			r.Name, dns.TypeToString[r.Type]))
	}
	return nil
}

// copyOf makes s, a set whose one answer aliases t, a copy of t.
func (s *Set) copyOf(t *Set) {
	v := new(bpf.Set)
	*v = *t.Data(v)
	own := s.rec.value
	v.Zone, v.Ttl, v.TtlDegraded = own.Zone, own.Ttl, own.TtlDegraded
	// Signed as the alias's own zone is, not as the target's.
	v.Flags = v.Flags&^uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED) | own.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED)
	s.rec = &record{policy: t.Policy(), addrs: t.Addrs(), checks: t.Checks(), regions: t.Regions(), value: v}
}
