package loader

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/steadydns/steadydns/bpf"
)

// MaxPoolCandidates is the most candidates a set holds: a pool's
// (POOL_CANDIDATES). A set of more than MaxCandidates is a pool.
const MaxPoolCandidates = int(bpf.SteadydnsLimitsPOOL_CANDIDATES)

// DefaultPoolCapacity is the pools the pool map holds when
// Options.PoolCapacity is 0.
const DefaultPoolCapacity = 16

// PoolsFor is the pool map's size for n pools: twice as many, rounded up
// to a power of two and at least DefaultPoolCapacity, so that a reload
// may add pools without a restart, and the map's size, which names the
// pin directory, changes seldom.
func PoolsFor(n int) uint32 {
	return uint32(max(DefaultPoolCapacity, 1<<bits.Len(uint(max(2*n, 1)-1))))
}

// poolSize is the bytes of one pool entry, as the array map spaces them.
const poolSize = int(unsafe.Sizeof(bpf.SteadydnsRecPool{}))

// PoolBytes is the memory the kernel reserves for a pool map of capacity
// entries, used or not.
func PoolBytes(capacity uint32) uint64 { return uint64(capacity) * uint64(poolSize) }

// poolIndex is the pool entry a slot's set names (struct rrset's pool,
// which shares its first bytes with Cand).
func poolIndex(v *bpf.SteadydnsRrset) *uint32 {
	return (*uint32)(unsafe.Pointer(&v.Cand))
}

// EncodePool is the slot's set and the pool entry of a pool kept at
// entry index, for queries of qtype: the set flagged RR_POOL and naming
// the entry, the entry holding the candidates and their answer sums.
func EncodePool(qtype uint16, v *bpf.Set, index uint32) (bpf.SteadydnsRrset, *bpf.SteadydnsRecPool) {
	rr := v.SteadydnsRrset
	rr.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_POOL)
	rr.RrSum, rr.Cand = [len(rr.RrSum)]uint16{}, [len(rr.Cand)]bpf.SteadydnsCandidate{}
	*poolIndex(&rr) = index
	p := new(bpf.SteadydnsRecPool)
	for i, c := range v.Candidates() {
		p.Cand[i] = c
		p.RrSum[i] = answerSum(qtype, &c)
	}
	return rr, p
}

// entry is one pool or ext entry to write with its set's slot: its index
// and its bytes.
type entry struct {
	index uint32
	bytes []byte
}

// entryTable is the pool map or the ext map through its memory mapping,
// and which entry each set holds. An entry is written only while its
// set's slot's sequence count is odd (recordTable.write), and goes back
// to free only once that slot holds another set or none, so a query that
// read the entry meanwhile sees the slot's count change.
type entryTable struct {
	what  string // "pool" or "ext", for errors
	size  int    // bytes of one entry, as the array map spaces them
	mem   []byte
	owner map[RecordKey]uint32
	free  []uint32
}

func (p *entryTable) capacity() int { return len(p.mem) / p.size }

// entry is entry i's bytes.
func (p *entryTable) entry(i uint32) []byte {
	return p.mem[int(i)*p.size : int(i+1)*p.size]
}

// claim is k's entry: its own, or a free one.
func (p *entryTable) claim(k RecordKey) (uint32, error) {
	if i, ok := p.owner[k]; ok {
		return i, nil
	}
	if len(p.free) == 0 {
		return 0, fmt.Errorf("writing record set %q/%d: all %d %s entries are in use", k.Wire, k.Qtype, p.capacity(), p.what)
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.owner[k] = i
	return i, nil
}

// release frees k's entry, if it has one: its slot no longer names it.
func (p *entryTable) release(k RecordKey) {
	if i, ok := p.owner[k]; ok {
		delete(p.owner, k)
		p.free = append(p.free, i)
	}
}

// freeRest puts every entry no set owns on the free list, once the
// owners are read back from the table.
func (p *entryTable) freeRest() {
	used := make(map[uint32]bool, len(p.owner))
	for _, i := range p.owner {
		used[i] = true
	}
	for i := range uint32(p.capacity()) {
		if !used[i] {
			p.free = append(p.free, i)
		}
	}
}

// store writes e's bytes into its entry, each word with an atomic store,
// in order, as storeOrdered writes a slot's; unchanged words are not
// stored.
func (p *entryTable) store(e *entry) { storeWords(p.entry(e.index), e.bytes) }

// unchanged reports whether e's entry holds its bytes already.
func (p *entryTable) unchanged(e *entry) bool {
	return e == nil || string(p.entry(e.index)) == string(e.bytes)
}

// PoolCapacity is the number of pools the pool map holds.
func (o *Objects) PoolCapacity() int { return o.records.pools.capacity() }
