package fallback

import (
	"encoding/binary"

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
type wireIndex map[string]*indexed

// indexed is one question's answer: a set of the zone file, or the name
// of a health-checked set to select from.
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
	sv := &served{v: v, idx: wireIndex{}}
	if v == nil {
		return sv
	}
	var key [maxKey]byte
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
				if e := indexAnswer(v, z, name, t); e != nil {
					binary.BigEndian.PutUint16(key[n:], t)
					sv.idx[string(key[:n+2])] = e
				}
			}
		}
	}
	return sv
}

// indexAnswer is the entry for name and qtype in z, or nil when the fast
// path would not answer it from the zone's lookup: the same conditions as
// answerFast's, for a lookup without DO, which is the lookup with DO in an
// unsigned zone.
func indexAnswer(v *View, z *zone.Zone, name string, qtype uint16) *indexed {
	res := z.Lookup(name, qtype, false)
	switch {
	case res.Kind == zone.Answer && len(res.Ns) == 0 && len(res.Extra) == 0 && staticSet(res.Answer, name, qtype):
		e := &indexed{n: len(res.Answer), signed: z.Signed()}
		e.answers = appendRRs(nil, res.Answer)
		return e
	case res.Kind == zone.Dynamic && len(res.Answer) == 0 && v.Records != nil:
		return &indexed{dynName: res.DynamicName, dynType: res.DynamicType}
	}
	return nil
}

// find returns the entry for q, whose key parseFast wrote into k, or nil.
// A lookup with the key converted in the index expression allocates
// nothing.
func (x wireIndex) find(k *[maxKey]byte, q *fastQuery) *indexed {
	return x[string(k[:q.keyLen])]
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
