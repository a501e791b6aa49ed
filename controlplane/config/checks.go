package config

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/steadydns/steadydns/prober"
)

// Checks holds a config's health checks, in file order, without a pointer
// per check. A Config lives as long as a host serves it, and a fleet's
// 65,536 checks as Check structs are a quarter of a million strings,
// slices and pointers: tens of megabytes that the garbage collector would
// mark on every cycle, so an aggregator's cost per push would grow with
// its checks. Here every string of every check is a span of one string,
// every list a span of one slice, and the rest plain values, so the whole
// store is a handful of pointers however many checks it holds. Only the
// compiled expect_body_regexp patterns stay pointers, one per check that
// has one.
//
// The zero value holds no checks. A Checks is read-only once built and
// safe for concurrent use.
type Checks struct {
	strs     string               // every string of every check, each distinct one once
	checks   []packedCheck        // in file order
	byID     []uint32             // positions in checks, sorted by id
	status   []prober.StatusRange // every check's expect_status, one list after the other
	children []span               // every calculated check's children, one list after the other
	regexps  []*regexp.Regexp
}

// span is a run of strs, status or children.
type span struct{ off, n uint32 }

// packedCheck is a Check with its strings and lists as spans.
type packedCheck struct {
	id, typ, target, path, method, host, sni, body, payload, reply, qname, answer, admin, cell span
	status, children                                                                           span
	regexp                                                                                     int32 // in regexps; -1 none
	port, qtype                                                                                uint16
	tlsVerify, keepAlive, invert                                                               bool
	expectRcode, minHealthy, unhealthy, healthy                                                int
	ttl, interval, timeout                                                                     time.Duration
}

// NewChecks packs checks, which keep their order. Ids are expected
// unique, as the keys of health_checks are.
func NewChecks(checks []*Check) Checks {
	var b checksBuilder
	b.seen = map[string]span{}
	s := Checks{checks: make([]packedCheck, len(checks)), byID: make([]uint32, len(checks))}
	for i, c := range checks {
		p := packedCheck{
			id: b.str(c.ID), typ: b.str(string(c.Type)), target: b.str(c.Target), path: b.str(c.Path),
			method: b.str(c.Method), host: b.str(c.Host), sni: b.str(c.SNI), body: b.str(c.ExpectBody),
			payload: b.str(c.Payload), reply: b.str(c.ExpectReply), qname: b.str(c.QName), answer: b.str(c.ExpectAnswer),
			admin: b.str(c.Admin), cell: b.str(c.Cell),
			status:   span{uint32(len(s.status)), uint32(len(c.ExpectStatus))},
			children: span{uint32(len(s.children)), uint32(len(c.Children))},
			regexp:   -1, port: c.Port, qtype: c.QType, tlsVerify: c.TLSVerify, keepAlive: c.KeepAlive, invert: c.Invert,
			expectRcode: c.ExpectRcode, minHealthy: c.MinHealthy, unhealthy: c.UnhealthyThreshold, healthy: c.HealthyThreshold,
			ttl: c.TTL, interval: c.Interval, timeout: c.Timeout,
		}
		s.status = append(s.status, c.ExpectStatus...)
		for _, ch := range c.Children {
			s.children = append(s.children, b.str(ch))
		}
		if c.ExpectBodyRegexp != nil {
			p.regexp = int32(len(s.regexps))
			s.regexps = append(s.regexps, c.ExpectBodyRegexp)
		}
		s.checks[i], s.byID[i] = p, uint32(i)
	}
	s.strs = b.b.String()
	slices.SortFunc(s.byID, func(a, b uint32) int { return strings.Compare(s.ID(int(a)), s.ID(int(b))) })
	return s
}

// checksBuilder appends strings to one, each distinct one once: a fleet's
// checks repeat their types, targets and cells.
type checksBuilder struct {
	b    strings.Builder
	seen map[string]span
}

func (b *checksBuilder) str(s string) span {
	if sp, ok := b.seen[s]; ok {
		return sp
	}
	sp := span{uint32(b.b.Len()), uint32(len(s))}
	b.b.WriteString(s)
	b.seen[s] = sp
	return sp
}

func (s *Checks) str(sp span) string { return s.strs[sp.off : sp.off+sp.n] }

// Len is the number of checks.
func (s *Checks) Len() int { return len(s.checks) }

// ID is the id of check i, in file order. Like every string the store
// gives, it shares the memory of all the checks' strings: whatever keeps
// one after the config is gone should keep a strings.Clone of it.
func (s *Checks) ID(i int) string { return s.str(s.checks[i].id) }

// Type is the type of check i.
func (s *Checks) Type(i int) CheckType { return s.typ(s.checks[i].typ) }

// typ is the CheckType constant a span spells, not a substring of strs:
// types become metric labels, which outlive the config.
func (s *Checks) typ(sp span) CheckType {
	t := CheckType(s.str(sp))
	if k := slices.Index(checkTypes, t); k >= 0 {
		return checkTypes[k]
	}
	return t
}

// Cell is the cell of check i.
func (s *Checks) Cell(i int) string { return s.str(s.checks[i].cell) }

// Find is the position of the check with id.
func (s *Checks) Find(id string) (int, bool) {
	k, ok := slices.BinarySearchFunc(s.byID, id, func(i uint32, id string) int { return strings.Compare(s.ID(int(i)), id) })
	if !ok {
		return 0, false
	}
	return int(s.byID[k]), true
}

// Has reports whether a check has id.
func (s *Checks) Has(id string) bool {
	_, ok := s.Find(id)
	return ok
}

// Check is check i as the file gave it. Its ExpectStatus shares the
// store's memory and must not be modified; Children is its own.
func (s *Checks) Check(i int) Check {
	p := &s.checks[i]
	c := Check{
		ID: s.str(p.id), Type: s.typ(p.typ), Target: s.str(p.target), Port: p.port,
		Path: s.str(p.path), Method: s.str(p.method), Host: s.str(p.host), SNI: s.str(p.sni), TLSVerify: p.tlsVerify,
		ExpectBody: s.str(p.body), KeepAlive: p.keepAlive, Payload: s.str(p.payload), ExpectReply: s.str(p.reply),
		QName: s.str(p.qname), QType: p.qtype, ExpectRcode: p.expectRcode, ExpectAnswer: s.str(p.answer),
		MinHealthy: p.minHealthy, TTL: p.ttl, Interval: p.interval, Timeout: p.timeout,
		UnhealthyThreshold: p.unhealthy, HealthyThreshold: p.healthy, Invert: p.invert, Admin: s.str(p.admin), Cell: s.str(p.cell),
	}
	if p.status.n > 0 {
		c.ExpectStatus = s.status[p.status.off : p.status.off+p.status.n : p.status.off+p.status.n]
	}
	if p.children.n > 0 {
		c.Children = make([]string, p.children.n)
		for k, sp := range s.children[p.children.off : p.children.off+p.children.n] {
			c.Children[k] = s.str(sp)
		}
	}
	if p.regexp >= 0 {
		c.ExpectBodyRegexp = s.regexps[p.regexp]
	}
	return c
}

// Get is the check with id.
func (s *Checks) Get(id string) (Check, bool) {
	i, ok := s.Find(id)
	if !ok {
		return Check{}, false
	}
	return s.Check(i), true
}

// ByID lists the checks' positions in the order of their ids. The slice
// is the store's own and must not be modified.
func (s *Checks) ByID() []uint32 { return s.byID }

// Clone is c with strings and lists of its own. A Check from Checks shares
// the memory of every check of its config, so one kept beyond the config
// (a prober's running job) would keep all of them.
func (c Check) Clone() Check {
	for _, s := range []*string{&c.ID, &c.Target, &c.Path, &c.Method, &c.Host, &c.SNI, &c.ExpectBody,
		&c.Payload, &c.ExpectReply, &c.QName, &c.ExpectAnswer, &c.Admin, &c.Cell} {
		*s = strings.Clone(*s)
	}
	c.Type = CheckType(strings.Clone(string(c.Type)))
	c.ExpectStatus = slices.Clone(c.ExpectStatus)
	c.Children = slices.Clone(c.Children)
	for i := range c.Children {
		c.Children[i] = strings.Clone(c.Children[i])
	}
	return c
}
