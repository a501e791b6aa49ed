// Package zone holds the zones steadydns is authoritative for, loaded from
// RFC 1035 zone files, and answers lookups in them as an authoritative
// server must (RFC 1034 §4.3.2, RFC 4592 wildcards, RFC 6672 DNAME,
// RFC 8482 ANY). A zone is immutable once loaded and marked, so any number
// of goroutines may look up at once.
package zone

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/miekg/dns"
)

// Zone is one loaded zone.
type Zone struct {
	origin string // lowercase fqdn
	labels int    // labels in origin
	soa    *dns.SOA
	apex   *node
	nodes  map[string]*node // by lowercase owner; empty non-terminals included
	hashed map[string]*node // NSEC3 owners: not names in the zone (RFC 5155 §7.2.8)

	// Denial of existence: the NSEC chain in canonical order (RFC 4034
	// §6.1), or the NSEC3 chain in hash order. A zone has one or neither.
	nsec  []*node
	nsec3 []*node

	// The SOA and its signatures as NODATA and NXDOMAIN carry them, with
	// the TTL of RFC 2308 §5.
	negSOA, negSigs []dns.RR

	online Signer // signs answers as they are made; nil for an unsigned or offline-signed zone

	room *loadRoom // while loading: where nodes and A and AAAA records go
	// cuts: the zone has a delegation or a DNAME, below which a name is
	// not its own; without, every name is, and none need be checked.
	cuts bool
}

type node struct {
	name    string          // owner as first spelled in the zone file
	sets    rrsets          // zone-file order; signatures under TypeRRSIG
	dynamic map[uint16]bool // A or AAAA sets served from elsewhere
}

// rrsets are a node's record sets, each type's records in zone-file
// order. A node holds a few types: a slice searched in order is a fraction
// of a map's memory, for each of a zone's millions of names.
type rrsets []rrset

type rrset struct {
	t   uint16
	rrs []dns.RR
}

// get returns the records of type t, nil for none.
func (s rrsets) get(t uint16) []dns.RR {
	for i := range s {
		if s[i].t == t {
			return s[i].rrs
		}
	}
	return nil
}

// add appends rr to the set of type t.
func (s *rrsets) add(t uint16, rr dns.RR) {
	for i := range *s {
		if (*s)[i].t == t {
			(*s)[i].rrs = append((*s)[i].rrs, rr)
			return
		}
	}
	*s = append(*s, rrset{t, []dns.RR{rr}})
}

// all yields every type and its records.
func (s rrsets) all() iter.Seq2[uint16, []dns.RR] {
	return func(yield func(uint16, []dns.RR) bool) {
		for _, set := range s {
			if !yield(set.t, set.rrs) {
				return
			}
		}
	}
}

// sigs returns the node's signatures that cover type t.
func (n *node) sigs(t uint16) []dns.RR {
	var out []dns.RR
	for _, rr := range n.sets.get(dns.TypeRRSIG) {
		if rr.(*dns.RRSIG).TypeCovered == t {
			out = append(out, rr)
		}
	}
	return out
}

// Load reads the zone file at path for origin. $INCLUDE is refused, so a
// zone file cannot pull in files the config does not name.
func Load(origin, path string) (*Zone, error) { return load(origin, path, pieceSize) }

// load is Load, parsing in pieces of about size bytes where the file
// allows (split); a size of 0 or less parses it whole.
func load(origin, path string, size int) (*Zone, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading zone %s: %w", origin, err)
	}
	var pieces []piece
	if size > 0 {
		pieces, _ = split(text, size) // none where it cannot cut
	}
	if len(pieces) > 1 {
		z, err := loadText(origin, path, func(yield func([]dns.RR) bool) error {
			return parsePieces(pieces, lower(dns.Fqdn(origin)), path, yield)
		})
		if !errors.Is(err, errParse) {
			return z, err
		}
		// The error's line is the piece's: the whole file's parser
		// finds it again, with its place in the file.
	}
	return loadText(origin, path, func(yield func([]dns.RR) bool) error {
		zp := dns.NewZoneParser(bytes.NewReader(text), lower(dns.Fqdn(origin)), path)
		stop := make(chan struct{})
		defer close(stop)
		for batch := range parsed(zp, stop) {
			if !yield(batch) {
				return nil
			}
		}
		// The parser is done: its channel closed after its last record.
		if err := zp.Err(); err != nil {
			return parseError(path, err)
		}
		return nil
	})
}

// errParse marks a syntax error found parsing in pieces.
var errParse = errors.New("zone file syntax")

// loadText builds the zone from the records parse yields, batch by batch
// in file order, stopping at the first record the zone refuses.
func loadText(origin, path string, parse func(yield func([]dns.RR) bool) error) (*Zone, error) {
	z := &Zone{
		origin: lower(dns.Fqdn(origin)),
		nodes:  make(map[string]*node),
		hashed: make(map[string]*node),
	}
	z.labels = dns.CountLabel(z.origin)
	z.apex = z.node(z.origin)
	z.room = new(loadRoom)
	defer func() { z.room = nil }()
	var addErr error
	err := parse(func(batch []dns.RR) bool {
		for _, rr := range batch {
			if addErr = z.add(rr); addErr != nil {
				return false
			}
		}
		return true
	})
	if addErr != nil {
		return nil, fmt.Errorf("%s: %w", path, addErr)
	}
	if err != nil {
		return nil, err
	}
	if err := z.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	z.index()
	return z, nil
}

// Len is the number of names the zone has a node for, as Owners yields
// them: what a caller sizes an index of the zone's sets by.
func (z *Zone) Len() int { return len(z.nodes) }

// parsed runs zp in a goroutine of its own and passes its records on in
// batches, in order, until the file ends or stop closes: on a zone of
// millions of records, parsing and adding each take seconds, and the two
// share nothing but the records.
func parsed(zp *dns.ZoneParser, stop <-chan struct{}) <-chan []dns.RR {
	const size = 1024
	out := make(chan []dns.RR, 4)
	go func() {
		defer close(out)
		batch := make([]dns.RR, 0, size)
		for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
			if batch = append(batch, rr); len(batch) < size {
				continue
			}
			select {
			case out <- batch:
			case <-stop:
				return
			}
			batch = make([]dns.RR, 0, size)
		}
		select {
		case out <- batch:
		case <-stop:
		}
	}()
	return out
}

// Origin returns the zone's origin, lowercase and fully qualified.
func (z *Zone) Origin() string { return z.origin }

// SOA returns the zone's SOA record as the zone file has it.
func (z *Zone) SOA() *dns.SOA { return z.soa }

// Signed reports whether the zone has a DNSKEY at its apex.
func (z *Zone) Signed() bool { return z.apex.sets.get(dns.TypeDNSKEY) != nil }

func (z *Zone) add(rr dns.RR) error {
	h := rr.Header()
	key := lower(h.Name)
	switch {
	case h.Class != dns.ClassINET:
		return fmt.Errorf("%s: class %s: only IN is served", rrName(rr), dns.ClassToString[h.Class])
	case !dns.IsSubDomain(z.origin, key):
		return fmt.Errorf("%s: outside the zone %s", rrName(rr), z.origin)
	case h.Rrtype == dns.TypeSOA && key != z.origin:
		return fmt.Errorf("%s: SOA below the apex", rrName(rr))
	case h.Rrtype == dns.TypeSOA && z.soa != nil:
		return fmt.Errorf("%s: second SOA", rrName(rr))
	case h.Rrtype == dns.TypeSOA:
		z.soa = rr.(*dns.SOA)
	}

	var n *node
	if h.Rrtype == dns.TypeNSEC3 || h.Rrtype == dns.TypeRRSIG && rr.(*dns.RRSIG).TypeCovered == dns.TypeNSEC3 {
		if n = z.hashed[key]; n == nil {
			n = &node{name: h.Name}
			z.hashed[key] = n
		}
	} else {
		n = z.node(h.Name)
	}
	if z.room.duplicate(n, h.Rrtype, rr) {
		return nil // an RRset is a set (RFC 2181 §5)
	}
	if h.Rrtype == dns.TypeDNAME || h.Rrtype == dns.TypeNS && key != z.origin {
		z.cuts = true
	}
	if h.Name == n.name {
		// The parser gives every record a name of its own: those spelled
		// as the node is share its copy, so a zone of millions of records
		// keeps one per name.
		h.Name = n.name
	}
	n.sets.add(h.Rrtype, z.room.move(rr))
	return nil
}

// loadRoom holds nodes, and A and AAAA records with their addresses, in
// blocks of many. Allocated each on its own, a zone of millions of names
// is millions of objects the collector marks again at every cycle of a
// load; in blocks, they are thousands.
type loadRoom struct {
	nodes []node
	as    []dns.A
	aaaas []dns.AAAA
	ips   []byte
	names []byte
	// The records of sets of manyRecords or more, by their set and their
	// RDATA's text, lowercased; indexed, how many of each such set's are.
	many    map[manyKey][]dns.RR
	indexed map[setRef]int
}

// manyRecords is the size from which a set's duplicates are looked up in
// the room rather than compared with each of its records: a set of tens
// of thousands would take minutes to load.
const manyRecords = 64

type setRef struct {
	n *node
	t uint16
}

type manyKey struct {
	set   setRef
	rdata string
}

// duplicate reports whether n's set of type t holds rr already. A nil
// room compares with each record.
func (r *loadRoom) duplicate(n *node, t uint16, rr dns.RR) bool {
	set := n.sets.get(t)
	if r == nil || len(set) < manyRecords {
		return slices.ContainsFunc(set, func(have dns.RR) bool { return dns.IsDuplicate(have, rr) })
	}
	if r.many == nil {
		r.many, r.indexed = map[manyKey][]dns.RR{}, map[setRef]int{}
	}
	ref := setRef{n, t}
	for _, have := range set[r.indexed[ref]:] {
		k := manyKey{ref, rdataKey(have)}
		r.many[k] = append(r.many[k], have)
	}
	r.indexed[ref] = len(set)
	// Records equal but for the case of a name in their RDATA have one
	// text lowercased; IsDuplicate decides among those.
	return slices.ContainsFunc(r.many[manyKey{ref, rdataKey(rr)}], func(have dns.RR) bool { return dns.IsDuplicate(have, rr) })
}

// rdataKey is rr's RDATA as text, lowercased.
func rdataKey(rr dns.RR) string {
	return strings.ToLower(strings.TrimPrefix(rr.String(), rr.Header().String()))
}

// node is a new node, in the room if there is one.
func (r *loadRoom) node() *node {
	if r == nil {
		return new(node)
	}
	if len(r.nodes) == 0 {
		r.nodes = make([]node, 1024)
	}
	n := &r.nodes[0]
	r.nodes = r.nodes[1:]
	return n
}

// move returns rr moved into the room if it is an A or AAAA record, else
// rr. A nil room moves nothing.
func (r *loadRoom) move(rr dns.RR) dns.RR {
	if r == nil {
		return rr
	}
	switch rr := rr.(type) {
	case *dns.A:
		if ip := rr.A.To4(); ip != nil {
			if len(r.as) == 0 {
				r.as = make([]dns.A, 1024)
			}
			a := &r.as[0]
			r.as = r.as[1:]
			*a = dns.A{Hdr: rr.Hdr, A: r.ip(ip)}
			return a
		}
	case *dns.AAAA:
		if len(rr.AAAA) == net.IPv6len {
			if len(r.aaaas) == 0 {
				r.aaaas = make([]dns.AAAA, 1024)
			}
			a := &r.aaaas[0]
			r.aaaas = r.aaaas[1:]
			*a = dns.AAAA{Hdr: rr.Hdr, AAAA: r.ip(rr.AAAA)}
			return a
		}
	}
	return rr
}

// str is a copy of s in the room. The parser allocates each owner name
// among the records' short-lived strings, and a name the zone keeps
// would hold a mostly empty span of the heap for each few names; in the
// room they lie side by side. A block is only appended to, so the bytes
// under a string never change.
func (r *loadRoom) str(s string) string {
	if r == nil || s == "" {
		return s
	}
	if cap(r.names)-len(r.names) < len(s) {
		r.names = make([]byte, 0, max(len(s), 64<<10))
	}
	off := len(r.names)
	r.names = append(r.names, s...)
	return unsafe.String(&r.names[off], len(s))
}

// ip is a copy of ip in the room.
func (r *loadRoom) ip(ip net.IP) net.IP {
	if len(r.ips) < len(ip) {
		r.ips = make([]byte, 16<<10)
	}
	out := net.IP(r.ips[:len(ip):len(ip)])
	copy(out, ip)
	r.ips = r.ips[len(ip):]
	return out
}

// node returns the node for owner, creating it and its ancestors up to the
// apex: a name with descendants exists even without records of its own
// (an empty non-terminal, RFC 4592 §2.2.2).
func (z *Zone) node(owner string) *node {
	key := lower(owner)
	if n := z.nodes[key]; n != nil {
		return n
	}
	n := z.room.node()
	if key == owner {
		owner = z.room.str(owner)
		key = owner
	} else {
		owner, key = z.room.str(owner), z.room.str(key)
	}
	n.name = owner
	z.nodes[key] = n
	if key != z.origin {
		off, _ := dns.NextLabel(owner, 0)
		z.node(owner[off:])
	}
	return n
}

func (z *Zone) check() error {
	if z.soa == nil {
		return fmt.Errorf("no SOA at the apex %s", z.origin)
	}
	if z.apex.sets.get(dns.TypeNS) == nil {
		return fmt.Errorf("no NS at the apex %s", z.origin)
	}
	// The first problem in name order, found without sorting the names.
	var first string
	var err error
	for key, n := range z.nodes {
		if e := checkNode(n); e != nil && (err == nil || key < first) {
			first, err = key, e
		}
	}
	return err
}

func checkNode(n *node) error {
	if len(n.sets.get(dns.TypeDNAME)) > 1 {
		return fmt.Errorf("%s: more than one DNAME", n.name)
	}
	cname := n.sets.get(dns.TypeCNAME)
	if cname == nil {
		return nil
	}
	if len(cname) > 1 {
		return fmt.Errorf("%s: more than one CNAME", n.name)
	}
	for t := range n.sets.all() {
		if t != dns.TypeCNAME && t != dns.TypeRRSIG && t != dns.TypeNSEC {
			return fmt.Errorf("%s: CNAME and %s at the same name", n.name, dns.TypeToString[t])
		}
	}
	return nil
}

// index normalises TTLs and builds the denial chains and negative SOA.
func (z *Zone) index() {
	for _, n := range z.nodes {
		sameTTL(n)
		if n.sets.get(dns.TypeNSEC) != nil {
			z.nsec = append(z.nsec, n)
		}
	}
	for _, n := range z.hashed {
		sameTTL(n)
		if n.sets.get(dns.TypeNSEC3) != nil {
			z.nsec3 = append(z.nsec3, n)
		}
	}
	slices.SortFunc(z.nsec, func(a, b *node) int { return canonicalCompare(a.name, b.name) })
	slices.SortFunc(z.nsec3, func(a, b *node) int { return strings.Compare(hashLabel(a), hashLabel(b)) })

	ttl := min(z.soa.Hdr.Ttl, z.soa.Minttl)
	z.negSOA = []dns.RR{withTTL(z.soa, ttl)}
	for _, sig := range z.apex.sigs(dns.TypeSOA) {
		z.negSigs = append(z.negSigs, withTTL(sig, ttl))
	}
}

// sameTTL gives every record of a set the lowest TTL among them, as RFC
// 2181 §5.2 asks, so that both answer paths send the same TTL. Signatures
// keep theirs: an RRSIG set covers many types.
func sameTTL(n *node) {
	for t, rrs := range n.sets.all() {
		if t == dns.TypeRRSIG {
			continue
		}
		ttl := rrs[0].Header().Ttl
		for _, rr := range rrs {
			ttl = min(ttl, rr.Header().Ttl)
		}
		for _, rr := range rrs {
			rr.Header().Ttl = ttl
		}
	}
}

// names returns the keys of every node, sorted.
// Owners yields every name the zone has a node for, lowercase and fully
// qualified, in no particular order: the owners of its records, the
// empty non-terminals between them and the apex, and the names marked
// dynamic. An index of the zone's answers starts from these; any other
// name is answered by a wildcard, or does not exist.
func (z *Zone) Owners() iter.Seq[string] { return maps.Keys(z.nodes) }

func (z *Zone) names() []string {
	keys := make([]string, 0, len(z.nodes))
	for k := range z.nodes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// authoritative reports whether key holds this zone's own data: not at or
// below a zone cut, and not below a DNAME (RFC 6672 §2.3).
func (z *Zone) authoritative(key string) bool {
	if !z.cuts {
		return true
	}
	for off := 0; ; {
		anc := key[off:]
		if n := z.nodes[anc]; n != nil {
			if anc != z.origin && n.sets.get(dns.TypeNS) != nil {
				return false
			}
			if off > 0 && n.sets.get(dns.TypeDNAME) != nil {
				return false
			}
		}
		var end bool
		if off, end = dns.NextLabel(key, off); end || anc == z.origin {
			return true
		}
	}
}

func withTTL(rr dns.RR, ttl uint32) dns.RR {
	c := dns.Copy(rr)
	c.Header().Ttl = ttl
	return c
}

func rrName(rr dns.RR) string {
	return rr.Header().Name + " " + dns.TypeToString[rr.Header().Rrtype]
}

// lower lowercases ASCII letters only, as DNS names compare (RFC 4343), so
// that a name keeps its length and label offsets.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// dnsParseError is the text of the dns package's zone parse errors:
// `path: dns: bad A A: "300.1.2.3" at line: 7:21`.
var dnsParseError = regexp.MustCompile(`^(?:.*?: )?dns: (.*): ("(?:[^"\\]|\\.)*") at line: (\d+):(\d+)$`)

// parseError puts the position first, `path:7:15: bad A A: "300.1.2.3"`,
// as compilers do, so that editors and CI logs jump to it and it reads like
// the config's own errors. The dns package gives the column where the token
// ends; the one where it starts is where a reader looks.
func parseError(path string, err error) error {
	m := dnsParseError.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	col, _ := strconv.Atoi(m[4]) // the pattern admits only digits
	if token, uerr := strconv.Unquote(m[2]); uerr == nil && col > utf8.RuneCountInString(token) {
		col -= utf8.RuneCountInString(token) - 1
	}
	return fmt.Errorf("%s:%s:%d: %s: %s", path, m[3], col, m[1], m[2])
}
