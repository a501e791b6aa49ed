package fallback

import (
	"encoding/binary"
	"hash/maphash"

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
// and where its entry starts, and an entry holds its fields, the key and
// the answers back to back, so the compare fetches the answers' first
// lines with the key's.
type wireIndex struct {
	// slots has a power of two entries, at most half of them in use,
	// each the key's hash's high 32 bits and its entry's place plus one
	// in the low 32 (0: empty). Linear probing.
	slots []uint64
	// blocks hold the entries, written once each as the zones are
	// walked: a buffer grown by copying would hold the index twice at
	// its last growth. An entry lies in one block, at a place of
	// blockBits bits within it.
	blocks [][]byte
	dyn    []dynSet // the health-checked sets, which entries refer to
	seed   maphash.Seed
}

// blockBits is a block's size in bits of its places: 1 MiB, so that a
// place's 32 bits address 4,095 blocks, and a place plus one still fits.
const blockBits = 20

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
		key    [maxKey]byte
		places []uint32
	)
	sv.idx.seed = maphash.MakeSeed()
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
				if place, ok := sv.idx.add(v, z, name, t, key[:n+2]); ok {
					places = append(places, place)
				}
			}
		}
	}
	sv.idx.link(places)
	return sv
}

// add writes the entry of name and qtype in z, under key, if the fast
// path answers it, and returns its place; false when it does not, when
// the entry is larger than a block (tens of thousands of records, more
// than a reply holds) or when the blocks are full, so that the zone's
// lookup answers it.
func (x *wireIndex) add(v *View, z *zone.Zone, name string, qtype uint16, key []byte) (uint32, bool) {
	e, rrs, ok := indexAnswer(v, z, name, qtype)
	if !ok {
		return 0, false
	}
	// An answer record is at most 12 bytes and an AAAA's 16 of data.
	size := entHeader + len(key) + 28*len(rrs)
	if size > 1<<blockBits {
		return 0, false
	}
	last := len(x.blocks) - 1
	if last < 0 || cap(x.blocks[last])-len(x.blocks[last]) < size {
		if len(x.blocks) == 1<<(32-blockBits)-1 { // a place plus one fits 32 bits
			return 0, false
		}
		x.blocks = append(x.blocks, make([]byte, 0, 1<<blockBits))
		last++
	}
	b := x.blocks[last]
	off := len(b)
	b = append(b, make([]byte, entHeader)...)
	b = append(b, key...)
	b = appendRRs(b, rrs)
	h := b[off:]
	binary.LittleEndian.PutUint16(h[entKeyLen:], uint16(len(key)))
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
	binary.LittleEndian.PutUint32(h[entAnsLen:], uint32(len(b)-off-entHeader-len(key)))
	x.blocks[last] = b
	return uint32(last)<<blockBits | uint32(off), true
}

// entry is the entry at place.
func (x *wireIndex) entry(place uint32) []byte {
	return x.blocks[place>>blockBits][place&(1<<blockBits-1):]
}

// link fills the slots with the entries at places, whose keys are
// distinct.
func (x *wireIndex) link(places []uint32) {
	size := 8
	for size < 2*len(places) {
		size *= 2
	}
	x.slots = make([]uint64, size)
	mask := uint64(size - 1)
	for _, place := range places {
		e := x.entry(place)
		k := e[entHeader : entHeader+int(binary.LittleEndian.Uint16(e[entKeyLen:]))]
		hash := maphash.Bytes(x.seed, k)
		for j := hash & mask; ; j = (j + 1) & mask {
			if x.slots[j] == 0 {
				x.slots[j] = hash&^0xffffffff | uint64(place+1)
				break
			}
		}
	}
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
		e := x.entry(uint32(s) - 1)
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
