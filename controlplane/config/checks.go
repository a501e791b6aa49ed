package config

import (
	"fmt"
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
// compiled expect_body_regexp and expect_regexp patterns stay pointers, one per distinct
// pattern.
//
// Checks mostly differ in their id and target: a check is its id, its
// target and a body that holds everything else, and checks with the same
// settings share one body, so 65,536 checks of a few kinds take about 20
// bytes each.
//
// The zero value holds no checks. A Checks is read-only once built and
// safe for concurrent use.
type Checks struct {
	strs     string               // every string of every check, each distinct one once
	heads    []checkHead          // in file order
	bodies   []checkBody          // each distinct one once
	byID     []uint32             // positions in heads, sorted by id
	status   []prober.StatusRange // the distinct expect_status lists, one after the other
	children []span               // the distinct lists of children, one after the other
	regexps  []*regexp.Regexp     // the distinct expect_body_regexp and expect_regexp patterns
}

// span is a run of strs, status or children. A check's regions are a
// list of strings like its children, kept in children too.
type span struct{ off, n uint32 }

// checkHead is what sets a check apart from others of its kind.
type checkHead struct {
	id, target span
	body       uint32 // in bodies
}

// checkBody is the rest of a Check, with its strings and lists as spans.
type checkBody struct {
	typ, path, method, host, sni, body, send, expect, payload, reply, qname, answer, admin, cell, initial span
	url, query, insufficient                                                                              span
	status, children, regions                                                                             span
	regexp, replyRegexp                                                                                   int32 // in regexps; -1 none
	port, qtype                                                                                           uint16
	tlsVerify, keepAlive, invert                                                                          bool
	expectRcode, minHealthy, unhealthy, healthy                                                           int
	ttl, interval, timeout                                                                                time.Duration
}

// NewChecks packs checks, which keep their order. Ids are expected
// unique, as the keys of health_checks are.
func NewChecks(checks []*Check) Checks {
	b := checksBuilder{strs: map[string]span{}, bodies: map[checkBody]uint32{}, lists: map[string]span{}, regexps: map[string]int32{}}
	s := Checks{heads: make([]checkHead, len(checks)), byID: make([]uint32, len(checks))}
	for i, c := range checks {
		body := checkBody{
			typ: b.str(string(c.Type)), path: b.str(c.Path), method: b.str(c.Method), host: b.str(c.Host), sni: b.str(c.SNI),
			body: b.str(c.ExpectBody), send: b.str(c.Send), expect: b.str(c.Expect), payload: b.str(c.Payload), reply: b.str(c.ExpectReply), qname: b.str(c.QName),
			answer: b.str(c.ExpectAnswer), admin: b.str(c.Admin), cell: b.str(c.Cell), initial: b.str(c.Initial),
			url: b.str(c.URL), query: b.str(c.Query), insufficient: b.str(c.InsufficientData),
			status: b.status(&s, c.ExpectStatus), children: b.children(&s, c.Children), regions: b.children(&s, c.Regions),
			regexp: b.regexp(&s, c.ExpectBodyRegexp), replyRegexp: b.regexp(&s, c.ExpectRegexp), port: c.Port, qtype: c.QType, tlsVerify: c.TLSVerify, keepAlive: c.KeepAlive, invert: c.Invert,
			expectRcode: c.ExpectRcode, minHealthy: c.MinHealthy, unhealthy: c.UnhealthyThreshold, healthy: c.HealthyThreshold,
			ttl: c.TTL, interval: c.Interval, timeout: c.Timeout,
		}
		k, ok := b.bodies[body]
		if !ok {
			k = uint32(len(s.bodies))
			b.bodies[body] = k
			s.bodies = append(s.bodies, body)
		}
		s.heads[i], s.byID[i] = checkHead{id: b.str(c.ID), target: b.str(c.Target), body: k}, uint32(i)
	}
	s.strs = b.b.String()
	slices.SortFunc(s.byID, func(a, b uint32) int { return strings.Compare(s.ID(int(a)), s.ID(int(b))) })
	return s
}

// checksBuilder stores each distinct string, list and body once: a
// fleet's checks repeat their types, cells, settings and status lists.
type checksBuilder struct {
	b       strings.Builder
	strs    map[string]span
	bodies  map[checkBody]uint32
	lists   map[string]span // a list's text, "s" or "c" then its items, to its span
	regexps map[string]int32
}

func (b *checksBuilder) str(s string) span {
	if sp, ok := b.strs[s]; ok {
		return sp
	}
	sp := span{uint32(b.b.Len()), uint32(len(s))}
	b.b.WriteString(s)
	b.strs[s] = sp
	return sp
}

// regexp is re's position in s.regexps, or -1 for none.
func (b *checksBuilder) regexp(s *Checks, re *regexp.Regexp) int32 {
	if re == nil {
		return -1
	}
	k, ok := b.regexps[re.String()]
	if !ok {
		k = int32(len(s.regexps))
		b.regexps[re.String()] = k
		s.regexps = append(s.regexps, re)
	}
	return k
}

func (b *checksBuilder) status(s *Checks, rs []prober.StatusRange) span {
	key := fmt.Sprint("s", rs)
	if sp, ok := b.lists[key]; ok {
		return sp
	}
	sp := span{uint32(len(s.status)), uint32(len(rs))}
	s.status = append(s.status, rs...)
	b.lists[key] = sp
	return sp
}

func (b *checksBuilder) children(s *Checks, ids []string) span {
	key := "c" + strings.Join(ids, "\x00")
	if sp, ok := b.lists[key]; ok {
		return sp
	}
	sp := span{uint32(len(s.children)), uint32(len(ids))}
	for _, id := range ids {
		s.children = append(s.children, b.str(id))
	}
	b.lists[key] = sp
	return sp
}

func (s *Checks) str(sp span) string { return s.strs[sp.off : sp.off+sp.n] }

// Len is the number of checks.
func (s *Checks) Len() int { return len(s.heads) }

// ID is the id of check i, in file order. Like every string the store
// gives, it shares the memory of all the checks' strings: whatever keeps
// one after the config is gone should keep a strings.Clone of it.
func (s *Checks) ID(i int) string { return s.str(s.heads[i].id) }

// Type is the type of check i.
func (s *Checks) Type(i int) CheckType { return s.typ(s.bodies[s.heads[i].body].typ) }

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
func (s *Checks) Cell(i int) string { return s.str(s.bodies[s.heads[i].body].cell) }

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
// store's memory and must not be modified; Children and Regions are its own. Checks
// with the same pattern share one compiled Regexp.
func (s *Checks) Check(i int) Check {
	h := &s.heads[i]
	p := &s.bodies[h.body]
	c := Check{
		ID: s.str(h.id), Type: s.typ(p.typ), Target: s.str(h.target), Port: p.port,
		Path: s.str(p.path), Method: s.str(p.method), Host: s.str(p.host), SNI: s.str(p.sni), TLSVerify: p.tlsVerify,
		ExpectBody: s.str(p.body), Send: s.str(p.send), Expect: s.str(p.expect), KeepAlive: p.keepAlive, Payload: s.str(p.payload), ExpectReply: s.str(p.reply),
		QName: s.str(p.qname), QType: p.qtype, ExpectRcode: p.expectRcode, ExpectAnswer: s.str(p.answer),
		MinHealthy: p.minHealthy, TTL: p.ttl, Interval: p.interval, Timeout: p.timeout,
		UnhealthyThreshold: p.unhealthy, HealthyThreshold: p.healthy, Invert: p.invert, Admin: s.str(p.admin), Cell: s.str(p.cell),
		Initial: s.str(p.initial), URL: s.str(p.url), Query: s.str(p.query), InsufficientData: s.str(p.insufficient),
	}
	if p.status.n > 0 {
		c.ExpectStatus = s.status[p.status.off : p.status.off+p.status.n : p.status.off+p.status.n]
	}
	c.Children = s.list(p.children)
	c.Regions = s.list(p.regions)
	if p.regexp >= 0 {
		c.ExpectBodyRegexp = s.regexps[p.regexp]
	}
	if p.replyRegexp >= 0 {
		c.ExpectRegexp = s.regexps[p.replyRegexp]
	}
	return c
}

// list is a list of strings kept in children, as a slice of its own;
// nil when empty.
func (s *Checks) list(sp span) []string {
	if sp.n == 0 {
		return nil
	}
	out := make([]string, sp.n)
	for k, ssp := range s.children[sp.off : sp.off+sp.n] {
		out[k] = s.str(ssp)
	}
	return out
}

// InRegion reports whether a prober of region runs check i: the check
// names no regions, or names region. A prober with no region runs only
// the checks that name none.
func (s *Checks) InRegion(i int, region string) bool {
	sp := s.bodies[s.heads[i].body].regions
	if sp.n == 0 {
		return true
	}
	for _, r := range s.children[sp.off : sp.off+sp.n] {
		if s.str(r) == region {
			return true
		}
	}
	return false
}

// Regions is check i's regions, a slice of its own; nil when it names none.
func (s *Checks) Regions(i int) []string { return s.list(s.bodies[s.heads[i].body].regions) }

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
		&c.Send, &c.Expect, &c.Payload, &c.ExpectReply, &c.QName, &c.ExpectAnswer, &c.Admin, &c.Cell,
		&c.URL, &c.Query, &c.InsufficientData} {
		*s = strings.Clone(*s)
	}
	c.Type = CheckType(strings.Clone(string(c.Type)))
	c.ExpectStatus = slices.Clone(c.ExpectStatus)
	c.Children = slices.Clone(c.Children)
	for i := range c.Children {
		c.Children[i] = strings.Clone(c.Children[i])
	}
	c.Regions = slices.Clone(c.Regions)
	for i := range c.Regions {
		c.Regions[i] = strings.Clone(c.Regions[i])
	}
	return c
}
