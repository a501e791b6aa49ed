// Package records compiles the configured record sets and the zone files'
// A/AAAA sets into the entries of the data-plane record table, and answers
// the fallback's questions about them with the same selection as XDP.
package records

import (
	"fmt"
	"hash/maphash"
	"iter"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/loader"
)

// Set is one compiled record set. A zone of millions holds millions of
// them, so a zone file's static set carries only what it differs in; a
// configured record's policy, checks and the rest are in rec.
type Set struct {
	Name string // lowercased fqdn
	// rrs are a static set's records: the zone's own, which a static
	// set reads its addresses from rather than hold them twice.
	rrs []dns.RR
	// key is Key's, kept from Compiled.add: a sync walks the sets of a
	// zone of millions several times, and the record table's mirror
	// keeps the same wire name.
	key loader.RecordKey
	rec *record // nil for a zone file's static set
	ttl uint32  // a static set's
	// Type is the set's qtype.
	Type uint16
	zone uint8 // a static set's zone index
	// signed: a static set of a signed zone.
	signed  bool
	Dynamic bool // from the config's records, not a zone file
	// Fallback keeps the set out of the data plane's record table: a
	// CNAME set, which XDP does not answer, or one that mixes an alias
	// with other answers, whose selection nests the target's.
	Fallback bool
}

// record is what a configured record holds beyond a static set.
type record struct {
	policy  string
	addrs   []netip.Addr // per candidate slot; invalid for a target name
	targets []string     // per slot: a CNAME's target or an alias's, "" for an address
	checks  []string     // per slot: the check id, "" when always healthy
	regions []string     // per slot: the answer's region, "" for none
	aliases []*Set       // per slot of a Fallback A or AAAA set: the alias's target, or nil
	value   *bpf.Set     // the data-plane set
}

// Len is how many candidate slots the set has.
func (s *Set) Len() int {
	if s.rec == nil {
		return len(s.rrs)
	}
	return len(s.rec.addrs)
}

// Addrs are the addresses of the set's slots, invalid for a target name.
// A static set's are built anew at each call.
func (s *Set) Addrs() []netip.Addr {
	if s.rec != nil {
		return s.rec.addrs
	}
	out := make([]netip.Addr, len(s.rrs))
	for j := range out {
		out[j] = s.addr(j)
	}
	return out
}

// addr is the address of slot j.
func (s *Set) addr(j int) netip.Addr {
	if s.rec != nil {
		return s.rec.addrs[j]
	}
	var a netip.Addr
	switch rr := s.rrs[j].(type) {
	case *dns.A:
		a, _ = netip.AddrFromSlice(rr.A.To4())
	case *dns.AAAA:
		a, _ = netip.AddrFromSlice(rr.AAAA.To16())
	}
	return a
}

// Policy is the set's policy as the config names it; "static" for a zone
// file's set.
func (s *Set) Policy() string {
	if s.rec == nil {
		return "static"
	}
	return s.rec.policy
}

// Checks are the check ids of the set's slots, "" for one always healthy.
// Nothing may write them.
func (s *Set) Checks() []string {
	if s.rec == nil {
		return noStrings[:len(s.rrs):len(s.rrs)]
	}
	return s.rec.checks
}

// Regions are the regions of the set's slots, "" for none. Nothing may
// write them.
func (s *Set) Regions() []string {
	if s.rec == nil {
		return noStrings[:len(s.rrs):len(s.rrs)]
	}
	return s.rec.regions
}

// aliases are the alias targets of a Fallback set's slots; nil for a set
// without.
func (s *Set) aliases() []*Set {
	if s.rec == nil {
		return nil
	}
	return s.rec.aliases
}

// Data is the set as the data plane holds it: a record's own, or, for a
// zone file's static set, built into buf, which holds it until the next
// call with buf.
func (s *Set) Data(buf *bpf.Set) *bpf.Set {
	if s.rec != nil {
		return s.rec.value
	}
	*buf = bpf.Set{}
	v := &buf.SteadydnsRrset
	v.Ttl = s.ttl
	v.N = uint8(len(s.rrs))
	v.MaxAnswers = v.N
	v.Policy = uint8(bpf.SteadydnsPolicyPOLICY_MULTIVALUE)
	v.Zone = s.zone
	// Every candidate checked by entry 0, always up, no backup, no geo,
	// every one answered: the program may skip the selection.
	v.Flags = uint8(bpf.SteadydnsRrsetFlagsRR_STATIC)
	if s.signed {
		v.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED)
	}
	for j := range s.rrs {
		setAddr(&v.Cand[j], s.addr(j))
	}
	return buf
}

// Answer is the candidate of slot j as the config gives it: an address,
// a CNAME's target or "alias " and the alias's target.
func (s *Set) Answer(j int) string {
	switch {
	case s.rec == nil || s.rec.targets == nil || s.rec.targets[j] == "":
		return s.addr(j).String()
	case s.Type == dns.TypeCNAME:
		return s.rec.targets[j]
	}
	return "alias " + s.rec.targets[j]
}

// Key is the set's data-plane key.
func (s *Set) Key() loader.RecordKey {
	if s.key.Wire != "" {
		return s.key
	}
	return loader.RecordKey{Wire: Wire(s.Name), Qtype: s.Type}
}

// Compiled is every record set of a config.
type Compiled struct {
	Sets     []*Set
	byName   setIndex
	Warnings []string // sets left to the fallback, and why
}

// Lookup finds a set by lowercased fqdn and type.
func (c *Compiled) Lookup(name string, qtype uint16) *Set {
	if i, ok := c.byName.find(c.Sets, strings.ToLower(name), qtype); ok {
		return c.Sets[i]
	}
	return nil
}

// setIndex finds a set by name and type: open addressing over the sets'
// positions, 4 to 8 bytes a set where a map of a zone's millions would
// take about 90, and be built a cache miss at a time.
type setIndex struct {
	seed  maphash.Seed
	slots []uint32 // a set's position in Sets plus one; 0 is empty
}

func (x *setIndex) hash(name string, qtype uint16) uint64 {
	return maphash.String(x.seed, name) ^ uint64(qtype)*0x9E3779B97F4A7C15
}

// build indexes sets, at most 70% full; of two sets of one name and type
// the later is found.
func (x *setIndex) build(sets []*Set) {
	x.seed = maphash.MakeSeed()
	size := 1
	for size*7 < len(sets)*10 {
		size <<= 1
	}
	x.slots = make([]uint32, size)
	mask := uint64(size - 1)
	for i, s := range sets {
		j := x.hash(s.Name, s.Type) & mask
		for ; x.slots[j] != 0; j = (j + 1) & mask {
			if t := sets[x.slots[j]-1]; t.Name == s.Name && t.Type == s.Type {
				break
			}
		}
		x.slots[j] = uint32(i + 1)
	}
}

// find is the position in sets, as built, of name's set of qtype.
func (x *setIndex) find(sets []*Set, name string, qtype uint16) (int, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for j := x.hash(name, qtype) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		if i := x.slots[j] - 1; sets[i].Name == name && sets[i].Type == qtype {
			return int(i), true
		}
	}
	return 0, false
}

// Entries are the record map contents, each key once, in the order
// compiled; walked again, the same.
func (c *Compiled) Entries() iter.Seq2[loader.RecordKey, *bpf.Set] {
	return func(yield func(loader.RecordKey, *bpf.Set) bool) {
		var buf bpf.Set
		for _, s := range c.Sets {
			if !s.Fallback && !yield(s.Key(), s.Data(&buf)) {
				return
			}
		}
	}
}

// Exts is how many of Entries' sets need an ext entry (loader.NeedsExt),
// counted without building it: what the ext map is sized for.
func (c *Compiled) Exts() int {
	n := 0
	var buf bpf.Set
	for _, s := range c.Sets {
		if !s.Fallback && loader.NeedsExt(s.Key(), s.Data(&buf)) {
			n++
		}
	}
	return n
}

// InTable is how many sets Entries holds, counted without building it.
func (c *Compiled) InTable() int {
	n := 0
	for _, s := range c.Sets {
		if !s.Fallback {
			n++
		}
	}
	return n
}

// Wire is the lowercased wire form of a fqdn, the data-plane key's name.
// It runs once per set at every load: a name without escapes is encoded
// here without the packer's allocations, the rest by the packer.
func Wire(name string) string {
	name = dns.Fqdn(name)
	if name == "." || strings.Contains(name, "\\") || len(name) > 254 {
		var buf [256]byte
		n, err := dns.PackDomainName(strings.ToLower(name), buf[:], 0, nil, false)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	var buf [256]byte
	n := 0
	for label := range strings.SplitSeq(name[:len(name)-1], ".") {
		if len(label) == 0 || len(label) > 63 {
			return "" // an empty or overlong label, as the packer refuses
		}
		buf[n] = byte(len(label))
		for i := range len(label) {
			b := label[i]
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			buf[n+1+i] = b
		}
		n += 1 + len(label)
	}
	buf[n] = 0
	return string(buf[:n+1])
}

// Compile builds the sets. zones are the loaded zones in config order;
// entry gives the health-table index a candidate with a check and a
// region reads, each "" for none (health.Index.AnswerEntry): a candidate
// of a region reads an entry of its own, so that shifting the region
// away takes it out on both answer paths. It marks each configured
// record as dynamic in its zone, which rejects names the zone cannot hold
// there (below a cut, at a CNAME, already in the file).
func Compile(cfg *config.Config, zones []*zone.Zone, entry func(check, region string) (uint32, bool)) (*Compiled, error) {
	// Sized for an A and an AAAA set per name, so that a zone of
	// millions does not grow them.
	n := len(cfg.Records)
	for _, z := range zones {
		n += 2 * z.Len()
	}
	c := &Compiled{Sets: make([]*Set, 0, n)}
	all := zone.NewZones(zones...)
	for i, r := range cfg.Records {
		key := fmt.Sprintf("records[%d].name", i)
		z := all.Find(r.Name)
		if z == nil {
			return nil, cfg.Errorf(key, "%s is in no configured zone", r.Name)
		}
		if err := z.MarkDynamic(r.Name, r.Type); err != nil {
			return nil, cfg.Errorf(key, "%v", err)
		}
		s, err := compileRecord(cfg, i, r, entry)
		if err != nil {
			return nil, err
		}
		// Past the zones XDP holds SOAs for, the index past them: its
		// NODATA goes to the fallback.
		s.rec.value.Zone = uint8(min(slices.Index(zones, z), int(bpf.SteadydnsLimitsMAX_ZONES)))
		if z.Online() {
			// XDP passes its DO queries to the fallback, which signs.
			s.rec.value.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED)
		}
		c.add(s)
	}
	var room slab
	for i, z := range zones {
		for zs := range z.DataPlaneSets() {
			if len(zs.RRs) > int(loader.MaxCandidates) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s %s in zone %s has %d records, more than the %d the kernel holds: the fallback answers it",
					zs.Name, dns.TypeToString[zs.Type], z.Origin(), len(zs.RRs), loader.MaxCandidates))
				continue
			}
			s := compileStatic(z, zs, &room)
			// As a record's: presign signs it with this zone's keys.
			s.zone = uint8(min(i, int(bpf.SteadydnsLimitsMAX_ZONES)))
			c.add(s)
		}
	}
	c.keys()
	c.byName.build(c.Sets)
	// Alias targets resolve once every set they may name is compiled.
	if err := c.resolveAliases(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Compiled) add(s *Set) { c.Sets = append(c.Sets, s) }

// keys gives every set its key, on every CPU: for a zone of millions,
// encoding the names takes a second on one.
func (c *Compiled) keys() {
	workers := min(runtime.GOMAXPROCS(0), runtime.NumCPU())
	per := (len(c.Sets) + workers - 1) / max(workers, 1)
	var wg sync.WaitGroup
	for lo := 0; lo < len(c.Sets); lo += per {
		wg.Go(func() {
			var prev *Set
			for _, s := range c.Sets[lo:min(lo+per, len(c.Sets))] {
				// A name's A and AAAA sets, one after the other, share
				// one wire name.
				if prev != nil && prev.Name == s.Name {
					s.key = loader.RecordKey{Wire: prev.key.Wire, Qtype: s.Type}
				} else {
					s.key = loader.RecordKey{Wire: Wire(s.Name), Qtype: s.Type}
				}
				prev = s
			}
		})
	}
	wg.Wait()
}

// DataPlanePolicy is how the data plane numbers a config's policy; false
// for a name the config does not know.
func DataPlanePolicy(p config.Policy) (bpf.SteadydnsPolicy, bool) {
	n, ok := policies[p]
	return n, ok
}

// The config's policies as the data plane numbers them. These maps are the
// only place the two meet; the config rejects any other value.
var (
	policies = map[config.Policy]bpf.SteadydnsPolicy{
		config.PolicyMultivalue: bpf.SteadydnsPolicyPOLICY_MULTIVALUE,
		config.PolicyFailover:   bpf.SteadydnsPolicyPOLICY_FAILOVER,
		config.PolicyWeighted:   bpf.SteadydnsPolicyPOLICY_WEIGHTED,
		config.PolicyRoundRobin: bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN,
	}
	whenDown = map[config.WhenAllDown]bpf.SteadydnsWhenAllDown{
		config.WhenAllDownAnswerAll: bpf.SteadydnsWhenAllDownWHEN_DOWN_ANSWER_ALL,
		config.WhenAllDownNoData:    bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA,
		config.WhenAllDownServFail:  bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL,
	}
	stale = map[config.StalePolicy]bpf.SteadydnsStalePolicy{
		config.StaleKeep:      bpf.SteadydnsStalePolicySTALE_KEEP,
		config.StaleAnswerAll: bpf.SteadydnsStalePolicySTALE_ANSWER_ALL,
	}
)

func compileRecord(cfg *config.Config, i int, r config.Record, entry func(check, region string) (uint32, bool)) (*Set, error) {
	s := &Set{Name: r.Name, Type: r.Type, Dynamic: true, rec: &record{policy: string(r.Policy), value: new(bpf.Set)}}
	v := s.rec.value
	v.Ttl = r.TTL
	v.TtlDegraded = r.TTLDegraded
	v.N = uint8(len(r.Answers))
	v.Policy = uint8(policies[r.Policy])
	v.WhenAllDown = uint8(whenDown[r.WhenAllDown])
	v.MaxAnswers = uint8(r.MaxAnswers)
	v.Stale = uint8(stale[r.Stale])
	primaries := 0
	// A set of more candidates than its slot keeps is a pool: the loader
	// puts them in the pool map.
	cands := v.Cand[:]
	if len(r.Answers) > len(cands) {
		v.Pool = make([]bpf.SteadydnsCandidate, len(r.Answers))
		cands = v.Pool
	}
	if r.Type == dns.TypeCNAME {
		// A CNAME RRset holds one record (RFC 2181 §10.1).
		v.MaxAnswers = 1
		s.Fallback = true
	}
	for j, a := range r.Answers {
		c := &cands[j]
		setAddr(c, a.Value)
		check := a.Check
		if a.EvaluateTargetHealth {
			// None when the target always has a healthy answer.
			check = config.TargetCheckID(a.Alias, r.Type)
			if _, ok := entry(check, ""); !ok {
				check = ""
			}
		}
		if check != "" || a.Region != "" {
			idx, ok := entry(check, a.Region)
			if !ok {
				return nil, cfg.Errorf(fmt.Sprintf("records[%d].answers[%d].check", i, j), "check %q of region %q has no health-table index", check, a.Region)
			}
			c.Check = idx
		}
		c.Weight = a.Weight
		c.Priority = a.Priority
		if a.Backup {
			c.Flags |= uint8(bpf.SteadydnsCandidateFlagsCAND_BACKUP)
		} else {
			primaries++
		}
		if a.Region != "" {
			c.Region = cfg.Server.Geo.RegionID(a.Region)
			v.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_GEO)
		}
		s.rec.addrs = append(s.rec.addrs, a.Value)
		s.rec.targets = append(s.rec.targets, a.Target+a.Alias) // at most one is set
		s.rec.checks = append(s.rec.checks, check)
		s.rec.regions = append(s.rec.regions, a.Region)
	}
	v.MinHealthy = uint8(r.MinHealthy.Count)
	if p := r.MinHealthy.Percent; p > 0 {
		// Round up: 50% of 3 primaries needs 2 healthy.
		v.MinHealthy = uint8((p*primaries + 99) / 100)
	}
	return s, nil
}

// slab hands out static sets from blocks of many: a zone of millions of
// sets takes thousands of allocations, not millions.
type slab struct{ sets []Set }

func (b *slab) set() *Set {
	if len(b.sets) == 0 {
		b.sets = make([]Set, 1024)
	}
	s := &b.sets[0]
	b.sets = b.sets[1:]
	return s
}

func compileStatic(z *zone.Zone, zs zone.Set, room *slab) *Set {
	s := room.set()
	*s = Set{Name: zs.Name, Type: zs.Type, rrs: zs.RRs, ttl: zs.TTL, signed: z.Signed()}
	return s
}

// noStrings are the checks and regions of a static set, every one none:
// the sets of a zone of millions share them.
var noStrings = make([]string, loader.MaxCandidates)

func setAddr(c *bpf.SteadydnsCandidate, a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		copy(c.Addr[:], b[:])
		return
	}
	c.Addr = a.As16()
}

// SOA is the zone's SOA as NODATA replies built in XDP carry it: the
// RDATA uncompressed, the TTL lowered to the SOA minimum (RFC 2308 §3). ok
// is false when the RDATA is too long for the data plane, which then
// leaves NODATA to the fallback.
func SOA(z *zone.Zone) (v bpf.SteadydnsZoneSoa, ok bool) {
	soa := z.SOA()
	buf := make([]byte, 1024)
	end, err := dns.PackRR(soa, buf, 0, nil, false)
	if err != nil {
		return v, false
	}
	apex := len(Wire(z.Origin()))
	rdata := buf[apex+10 : end]
	if len(rdata) > len(v.Rdata) {
		return v, false
	}
	v.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
	v.Rdlen = uint16(len(rdata))
	v.ApexLen = uint8(apex)
	copy(v.Rdata[:], rdata)
	return v, true
}
