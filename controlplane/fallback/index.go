package fallback

import (
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/zone"
)

// served is what the server answers from: a view and the fast path's
// index of it, swapped together so that a query never reads an index of
// another view.
type served struct {
	v   *View // nil: nothing to answer from
	idx wireIndex
}

// wireIndex holds the answers the fast path gives straight from the
// question's bytes: for every A and AAAA question the zones answer with a
// set of the zone file or a health-checked set, the key is the name in
// wire form with ASCII letters lowercased, followed by the qtype. A
// lookup costs one hash of the name and one compare, where the zone's
// lookup builds the name's presentation form and looks up a map per
// label. It is built from the zones' own lookups when a view is set, and
// only read afterwards. Wildcards, CNAME chains, delegations, negative
// answers and the debug names are not in it: their questions take the
// zone lookup, as before.
//
// It is a table of its own rather than a Go map so that a lookup reads
// two places in memory, not four: a map keyed by strings led from its
// slot to the key's bytes, to the entry, and from there to the answers,
// each a cache miss under load, where the kernel's receive and send paths
// take the caches between two batches. Here a slot holds the key's hash
// and where its entry starts in data, and an entry holds its fields, the
// key and the answers back to back, so the compare fetches the answers'
// first lines with the key's.
type wireIndex struct {
	// slots has a power of two entries, at most half of them in use,
	// each the key's hash's high 32 bits and its entry's offset in data
	// plus one in the low 32 (0: empty). Linear probing.
	slots []uint64
	data  []byte
	dyn   []dynSet // the health-checked sets, which entries refer to
	seed  maphash.Seed
}

// An entry in data: its header, then the key, then the answers.
const (
	entKeyLen = 0 // uint16: the key's length
	entSigned = 2 // 1: a set of a signed zone
	entDyn    = 3 // 1: a health-checked set, n the index of its dynSet
	entN      = 4 // uint32: the set's records, or the dynSet's index
	entAnsLen = 8 // uint32: the answers' length
	entHeader = 12
)

// dynSet is a health-checked set's lowercase name and type, for
// Records.Select.
type dynSet struct {
	name string
	typ  uint16
}

// indexed is one question's answer as find returns it: a set of the zone
// file or the name of a health-checked set to select from.
type indexed struct {
	// A set of the zone file: its n records as the reply carries them,
	// each owned by a pointer to the question.
	answers []byte
	n       int
	// The zone is signed: a query with DO gets the set's signatures too,
	// which only the zone lookup adds.
	signed bool

	// A health-checked set: its lowercase name and type, for
	// Records.Select; empty for a set of the zone file.
	dynName string
	dynType uint16
}

// maxKey is the room of an index key: a name of 255 bytes and a qtype.
const maxKey = 255 + 2

// newServed indexes v for a server whose debug names are under debug.
func newServed(v *View, debug string) *served {
	sv := &served{v: v}
	if v == nil {
		return sv
	}
	var (
		key [maxKey]byte
		all entries
	)
	for z := range v.Zones.All() {
		for name := range z.Owners() {
			// A name below a delegation to another of the zones is
			// that zone's, and the debug names get the handler's
			// explanations.
			if v.Zones.Find(name) != z || (debug != "" && under(name, debug)) {
				continue
			}
			n, err := dns.PackDomainName(name, key[:], 0, nil, false)
			if err != nil {
				continue
			}
			for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
				binary.BigEndian.PutUint16(key[n:], t)
				all.add(v, z, name, t, key[:n+2])
			}
		}
	}
	sv.idx = buildIndex(&all)
	return sv
}

// entries are the index's entries before it is laid out: the keys, and
// the zone sets' answers, back to back in one buffer each, so that a zone
// of millions of sets takes a few large allocations, not millions.
type entries struct {
	keys, answers []byte
	ents          []indexed // answers nil: they are in answers, up to ansEnd
	keyEnd        []int
	ansEnd        []int
}

// add adds the entry of name and qtype in z, under key, if the fast
// path answers it.
func (all *entries) add(v *View, z *zone.Zone, name string, qtype uint16, key []byte) {
	e, rrs, ok := indexAnswer(v, z, name, qtype)
	if !ok {
		return
	}
	all.keys = append(grow(all.keys, len(key)), key...)
	// An answer record is at most 12 bytes and an AAAA's 16 of data.
	all.answers = appendRRs(grow(all.answers, 28*len(rrs)), rrs)
	all.ents = append(grow(all.ents, 1), e)
	all.keyEnd = append(grow(all.keyEnd, 1), len(all.keys))
	all.ansEnd = append(grow(all.ansEnd, 1), len(all.answers))
}

// grow makes room for n more elements in s, doubling it when it lacks
// them: append grows a large slice by a quarter at a time, copying all of
// it again each time, which for an index of millions of sets is most of
// its cost.
func grow[S ~[]E, E any](s S, n int) S {
	if cap(s)-len(s) < n {
		return slices.Grow(s, max(n, len(s)))
	}
	return s
}

// buildIndex lays out the entries of all, whose keys are distinct.
func buildIndex(all *entries) wireIndex {
	x := wireIndex{seed: maphash.MakeSeed()}
	size := 8
	for size < 2*len(all.ents) {
		size *= 2
	}
	x.slots = make([]uint64, size)
	x.data = make([]byte, 0, min(len(all.ents)*entHeader+len(all.keys)+len(all.answers), 1<<32))
	var k0, a0 int
	for i, e := range all.ents {
		k, answers := all.keys[k0:all.keyEnd[i]], all.answers[a0:all.ansEnd[i]]
		k0, a0 = all.keyEnd[i], all.ansEnd[i]
		off := len(x.data)
		if off+entHeader+len(k)+len(answers) >= 1<<32 {
			// A slot holds an offset of 32 bits: the questions past
			// 4 GiB of entries take the zone's lookup.
			break
		}
		var h [entHeader]byte
		binary.LittleEndian.PutUint16(h[entKeyLen:], uint16(len(k)))
		if e.signed {
			h[entSigned] = 1
		}
		n := uint32(e.n)
		if e.dynName != "" {
			h[entDyn] = 1
			n = uint32(len(x.dyn))
			x.dyn = append(x.dyn, dynSet{e.dynName, e.dynType})
		}
		binary.LittleEndian.PutUint32(h[entN:], n)
		binary.LittleEndian.PutUint32(h[entAnsLen:], uint32(len(answers)))
		x.data = append(x.data, h[:]...)
		x.data = append(x.data, k...)
		x.data = append(x.data, answers...)
		hash := maphash.Bytes(x.seed, k)
		mask := uint64(len(x.slots) - 1)
		for j := hash & mask; ; j = (j + 1) & mask {
			if x.slots[j] == 0 {
				x.slots[j] = hash&^0xffffffff | uint64(off+1)
				break
			}
		}
	}
	return x
}

// indexAnswer is the entry for name and qtype in z, and a zone set's
// records, if the fast path would answer it from the zone's lookup: the
// same conditions as answerFast's, for a lookup without DO, which is the
// lookup with DO in an unsigned zone.
func indexAnswer(v *View, z *zone.Zone, name string, qtype uint16) (indexed, []dns.RR, bool) {
	res := z.Lookup(name, qtype, false)
	switch {
	case res.Kind == zone.Answer && len(res.Ns) == 0 && len(res.Extra) == 0 && staticSet(res.Answer, name, qtype):
		return indexed{n: len(res.Answer), signed: z.Signed()}, res.Answer, true
	case res.Kind == zone.Dynamic && res.DynamicType == qtype && len(res.Answer) == 0 && v.Records != nil:
		// Signed online, DO gets the answer's signatures from the handler.
		return indexed{dynName: res.DynamicName, dynType: res.DynamicType, signed: z.Online()}, nil, true
	}
	return indexed{}, nil, false
}

// find returns the entry under key, if there is one. It allocates
// nothing.
func (x *wireIndex) find(key []byte) (indexed, bool) {
	if len(x.slots) == 0 {
		return indexed{}, false
	}
	hash := maphash.Bytes(x.seed, key)
	mask := uint64(len(x.slots) - 1)
	for j := hash & mask; ; j = (j + 1) & mask {
		s := x.slots[j]
		if s == 0 {
			return indexed{}, false
		}
		if s>>32 != hash>>32 {
			continue
		}
		e := x.data[uint32(s)-1:]
		klen := int(binary.LittleEndian.Uint16(e[entKeyLen:]))
		if string(e[entHeader:entHeader+klen]) != string(key) {
			continue
		}
		n := binary.LittleEndian.Uint32(e[entN:])
		if e[entDyn] == 1 {
			d := x.dyn[n]
			return indexed{dynName: d.name, dynType: d.typ, signed: e[entSigned] == 1}, true
		}
		alen := int(binary.LittleEndian.Uint32(e[entAnsLen:]))
		a := e[entHeader+klen:]
		return indexed{answers: a[:alen:alen], n: int(n), signed: e[entSigned] == 1}, true
	}
}

// appendRRs appends a set of the zone file, which staticSet has passed, as
// a reply's answers owned by the question.
func appendRRs(r []byte, rrs []dns.RR) []byte {
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.A:
			r = appendAddr(r, dns.TypeA, rr.Hdr.Ttl, rr.A.To4())
		case *dns.AAAA:
			r = appendAddr(r, dns.TypeAAAA, rr.Hdr.Ttl, rr.AAAA)
		}
	}
	return r
}
