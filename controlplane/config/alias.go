package config

import (
	"fmt"
	"slices"

	"github.com/miekg/dns"
)

// TargetCheckID is the id of the calculated check that an alias with
// evaluate_target_health takes its health from: healthy while at least one
// candidate of the set name, typ is. Ids of health_checks cannot hold ':'
// or '.', so it never meets one of them.
func TargetCheckID(name string, typ uint16) string {
	return "alias:" + name + ":" + dns.TypeToString[typ]
}

// alias checks the alias answer j of r.
func (v *validator) alias(r Record, j int, key func(string) string) {
	ak := func(k string) string { return fmt.Sprintf("%s[%d].%s", key("answers"), j, k) }
	a := r.Answers[j]
	_, ok := dns.IsDomainName(a.Alias)
	switch {
	case a.Value.IsValid():
		v.errorf(ak("value"), "give value or alias, not both")
	case !ok:
		v.errorf(ak("alias"), "invalid domain name %q", a.Alias)
	case !v.inZone(a.Alias):
		v.errorf(ak("alias"), "%s is not inside any zone in zones: an alias answers a set this server serves", a.Alias)
	case a.Alias == r.Name:
		v.errorf(ak("alias"), "alias loop: %s %s aliases itself", r.Name, dns.TypeToString[r.Type])
	default:
		if k := slices.IndexFunc(r.Answers, func(b Answer) bool { return b.Alias == a.Alias }); k < j {
			v.errorf(ak("alias"), "duplicate alias %s, first at line %d", a.Alias, v.c.Line(fmt.Sprintf("%s[%d].alias", key("answers"), k)))
		}
	}
	// As with Route 53: the target's health is the alias's, and a check
	// beside it would leave one of the two unread.
	if a.EvaluateTargetHealth && a.Check != "" {
		v.errorf(ak("check"), "evaluate_target_health takes the health of the alias's target: give a check or evaluate_target_health, not both")
	}
}

// cnameTarget checks answer j of the CNAME record r.
func (v *validator) cnameTarget(r Record, j int, key func(string) string) {
	ak := func(k string) string { return fmt.Sprintf("%s[%d].%s", key("answers"), j, k) }
	a := r.Answers[j]
	_, ok := dns.IsDomainName(a.Target)
	switch {
	case a.Alias != "":
		v.errorf(ak("alias"), "a CNAME answer names its target in value; alias is for A and AAAA records")
	case a.EvaluateTargetHealth:
		v.errorf(ak("evaluate_target_health"), "applies to an alias only")
	case a.Target == "":
		v.errorf(ak("value"), "required: the name the CNAME points to")
	case !ok:
		v.errorf(ak("value"), "invalid domain name %q", a.Target)
	case a.Target == r.Name:
		v.errorf(ak("value"), "CNAME loop: %s points to itself", r.Name)
	default:
		if k := slices.IndexFunc(r.Answers, func(b Answer) bool { return b.Target == a.Target }); k < j {
			v.errorf(ak("value"), "duplicate target %s, first at line %d", a.Target, v.c.Line(fmt.Sprintf("%s[%d].value", key("answers"), k)))
		}
	}
}

// cname checks what a CNAME record i needs of the rest: its name holds
// nothing else (RFC 1034 §3.6.2) and is no zone's apex, which holds the
// SOA and NS; and it answers one target, as a CNAME RRset holds one record
// (RFC 2181 §10.1).
func (v *validator) cname(i int, r Record, key func(string) string) {
	if slices.ContainsFunc(v.c.Zones, func(z Zone) bool { return z.Origin == r.Name }) {
		v.errorf(key("name"), "%s is a zone apex, which holds the SOA and NS: a CNAME cannot be there; give the A and AAAA records alias answers instead", r.Name)
	}
	for k, o := range v.c.Records {
		if k != i && o.Name == r.Name && o.Type != dns.TypeCNAME {
			v.errorf(key("name"), "%s has a CNAME, so it can hold no other record, but records[%d] (line %d) is its %s set", r.Name, k, v.c.Line(fmt.Sprintf("records[%d].name", k)), dns.TypeToString[o.Type])
		}
	}
	if v.c.Line(key("max_answers")) != 0 && r.MaxAnswers != 1 {
		v.errorf(key("max_answers"), "a CNAME set answers one target: set 1 or leave the key out")
	}
}

// aliases refuses alias loops and chains: an alias answers its target's
// own selection, which must not hold another alias (nor be a CNAME) to
// follow. It also refuses a probed check without a target on answers
// that have no address to probe.
func (v *validator) aliases() {
	type nameType struct {
		name string
		typ  uint16
	}
	at := map[nameType]int{}
	withAddr := map[string]bool{}
	for i, r := range v.c.Records {
		at[nameType{r.Name, r.Type}] = i
		for _, a := range r.Answers {
			if a.Value.IsValid() {
				withAddr[a.Check] = true
			}
		}
	}
	for i, r := range v.c.Records {
		for j, a := range r.Answers {
			ak := fmt.Sprintf("records[%d].answers[%d].", i, j)
			if c := v.byID[a.Check]; c != nil && c.Target == "" && !withAddr[a.Check] && !a.Value.IsValid() {
				if slices.Contains(targetTypes, c.Type) {
					v.errorf(ak+"check", "check %s has no target, and this answer has no address for it to probe: give the check a target", a.Check)
				}
			}
			if a.Alias == "" || a.Alias == r.Name || r.Type == dns.TypeCNAME {
				continue
			}
			if k, ok := at[nameType{a.Alias, dns.TypeCNAME}]; ok {
				v.errorf(ak+"alias", "alias chain: %s is a CNAME (records[%d], line %d); an alias points at an A or AAAA set", a.Alias, k, v.c.Line(fmt.Sprintf("records[%d].name", k)))
				continue
			}
			k, ok := at[nameType{a.Alias, r.Type}]
			if !ok {
				continue
			}
			t := v.c.Records[k]
			if slices.ContainsFunc(t.Answers, func(b Answer) bool { return b.Alias == r.Name }) {
				v.errorf(ak+"alias", "alias loop: %s → %s → %s (records[%d], line %d)", r.Name, a.Alias, r.Name, k, v.c.Line(fmt.Sprintf("records[%d].name", k)))
			} else if slices.ContainsFunc(t.Answers, func(b Answer) bool { return b.Alias != "" }) {
				v.errorf(ak+"alias", "alias chain: %s %s holds aliases too (records[%d], line %d); point at the end of the chain", a.Alias, dns.TypeToString[r.Type], k, v.c.Line(fmt.Sprintf("records[%d].name", k)))
			}
		}
	}
}

// targetChecks are the calculated checks that aliases with
// evaluate_target_health take their health from, one per target set (see
// TargetCheckID): the target's checks are its children, one healthy is
// enough. The aggregator computes them as it does any calculated check, so
// an edge of a fleet reads them from the table like the rest. A target
// with a candidate that has no check always has a healthy answer, and one
// from a zone file has no check at all: their aliases need none. checks
// are the validated checks, their cells resolved.
func (c *Config) targetChecks(checks []*Check) ([]*Check, []*Error) {
	byID := map[string]*Check{}
	for _, ch := range checks {
		byID[ch.ID] = ch
	}
	var out []*Check
	var errs []*Error
	made := map[string]bool{}
	for i, r := range c.Records {
		for j, a := range r.Answers {
			if !a.EvaluateTargetHealth {
				continue
			}
			k := slices.IndexFunc(c.Records, func(t Record) bool { return t.Name == a.Alias && t.Type == r.Type })
			id := TargetCheckID(a.Alias, r.Type)
			if k < 0 || made[id] {
				continue
			}
			t := c.Records[k]
			if slices.ContainsFunc(t.Answers, func(b Answer) bool { return b.Check == "" }) {
				continue
			}
			made[id] = true
			tc := &Check{ID: id, Type: CheckCalculated, MinHealthy: 1, Admin: "auto"}
			for _, b := range t.Answers {
				if !slices.Contains(tc.Children, b.Check) {
					tc.Children = append(tc.Children, b.Check)
				}
			}
			tc.Cell = byID[tc.Children[0]].Cell
			for _, ch := range tc.Children[1:] {
				// A cell's aggregators see only their own cell's states.
				if cell := byID[ch].Cell; cell != tc.Cell {
					errs = append(errs, c.Errorf(fmt.Sprintf("records[%d].answers[%d].evaluate_target_health", i, j),
						"the checks of %s %s are in cells %q and %q: the target's health is computed in one cell, so its checks must share it", a.Alias, dns.TypeToString[r.Type], tc.Cell, cell))
					break
				}
			}
			out = append(out, tc)
		}
	}
	return out, errs
}
