package loader

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
)

// MaxCandidates is K, the candidates a record set keeps in its slot
// (MAX_CANDIDATES); a set of more is a pool (MaxPoolCandidates).
const MaxCandidates = len(bpf.SteadydnsRrset{}.Cand)

// RecordKey identifies a record set in the data plane: the lowercased wire
// name and the query type.
type RecordKey struct {
	Wire  string // lowercased wire-format name, root label included
	Qtype uint16
}

// The record table's shape, from bpf/types.h.
const (
	probeMax = int(bpf.SteadydnsLimitsPROBE_MAX)
	slotSize = int(unsafe.Sizeof(bpf.SteadydnsRecSlot{}))
)

// DefaultRecordCapacity is the record sets the object's table holds when
// Options.RecordCapacity is 0: half its slots.
const DefaultRecordCapacity = 1 << 16

// TableSlots is the number of slots of a table for capacity record sets:
// twice as many, rounded up to a power of two, so that at most half are in
// use and every set lands within PROBE_MAX slots of its home.
func TableSlots(capacity uint32) uint32 {
	return 1 << bits.Len32(max(2*capacity, 2)-1)
}

// TableBytes is the memory the kernel reserves for a table of capacity
// record sets, used or not.
func TableBytes(capacity uint32) uint64 {
	return uint64(TableSlots(capacity)) * uint64(slotSize)
}

// hashMul is HASH_MUL of bpf/dns.h.
const hashMul = 0x9E3779B97F4A7C15

// NameHash is name_hash, which hash_name in bpf/dns.h computes while it
// lowercases the query name: the slot a set goes to is the top bits of the
// hash of its wire name and type. The two must agree bit for bit, or the
// program looks in the wrong place; bpf's tests answer names of every
// length through the program to hold them to it.
func NameHash(wire string, qtype uint16) uint64 {
	h := uint64(len(wire))
	for at := 0; at < len(wire); at += 8 {
		var w uint64
		for i := 0; i < 8 && at+i < len(wire); i++ {
			w |= uint64(wire[at+i]) << (8 * i)
		}
		h = (h ^ w) * hashMul
		h ^= h >> 29
	}
	h = (h ^ uint64(qtype)) * hashMul
	return h ^ h>>32
}

// slotHead is what the loader keeps of each slot to place sets without
// reading the table back.
type slotHead struct {
	used bool
	dist uint8 // slots from its home
	key  RecordKey
	hash uint64
}

// minLiveBits is log2 of the smallest live region, 1,024 slots (512 KiB):
// below it a resize would save nothing worth its moves.
const minLiveBits = 10

// liveBits is log2 of the live region for n sets: the smallest power of
// two that keeps them at a load of at most one half, at least minLiveBits
// and at most the whole table's maxBits.
func liveBits(n int, maxBits uint32) uint32 {
	b := uint32(bits.Len(uint(max(2*n, 2) - 1)))
	return min(max(b, minLiveBits), maxBits)
}

// recordTable is the record map through its memory mapping, and the
// placement of every set in it. The sets sit in the table's first
// 1 << bits slots, the live region, which grows and shrinks with their
// count; the rec_bits map tells the program its size. tags is the hot
// index (rec_tags), one word a slot, which write keeps with the slots;
// pools the pool map (rec_pools), whose entries it writes with the slots
// that name them.
type recordTable struct {
	mu       sync.Mutex
	mem      []byte
	tags     []byte
	pools    *poolTable
	live     *ebpf.Map // rec_bits
	bits     uint32    // of the live region
	maxBits  uint32    // of the whole table
	capacity int
	heads    []slotHead // every slot of the table
	index    map[RecordKey]uint32
	writes   uint64 // slots written since the table was opened, unchanged ones skipped
	// scratch is the slot put encodes a set into before writing it: one
	// for the table, not one allocated per set of a zone of millions.
	scratch bpf.SteadydnsRecSlot
}

// openRecordTable maps the records map, its hot index and the pool map,
// and reads the placement of the sets already in them, which pinned maps
// keep across restarts, with the size of its live region and the pool
// entries the sets name. The index is rewritten from the slots, so it
// holds what they hold whatever an earlier process left.
func openRecordTable(fd, tagsFD, poolsFD int, live *ebpf.Map, slots, capacity, pools uint32) (*recordTable, error) {
	mem, err := unix.Mmap(fd, 0, int(slots)*slotSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the record table: %w", err)
	}
	tags, err := unix.Mmap(tagsFD, 0, int(slots)*tagSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("mapping the record table's index: %w", err)
	}
	pmem, err := unix.Mmap(poolsFD, 0, int(pools)*poolSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(mem)
		unix.Munmap(tags)
		return nil, fmt.Errorf("mapping the pool map: %w", err)
	}
	t := &recordTable{mem: mem, tags: tags, pools: &poolTable{mem: pmem, owner: map[RecordKey]uint32{}}, live: live,
		maxBits: uint32(bits.Len32(slots - 1)), capacity: int(capacity), heads: make([]slotHead, slots), index: map[RecordKey]uint32{}}
	var b uint32
	if err := live.Lookup(uint32(0), &b); err != nil {
		t.close()
		return nil, fmt.Errorf("reading the record table's live size: %w", err)
	}
	if b == 0 || b > t.maxBits {
		// A new table: no set yet, the smallest region.
		b = liveBits(0, t.maxBits)
		if err := live.Put(uint32(0), b); err != nil {
			t.close()
			return nil, fmt.Errorf("writing the record table's live size: %w", err)
		}
	}
	t.bits = b
	for j := range uint32(1) << b {
		s := t.slot(j)
		t.setTag(j, s)
		if s.State != uint8(bpf.SteadydnsSlotStateSLOT_USED) {
			continue
		}
		k := RecordKey{Wire: slotName(s), Qtype: s.Qtype}
		t.heads[j] = slotHead{used: true, dist: s.Dist, key: k, hash: s.Hash}
		t.index[k] = j
		if s.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_POOL) != 0 {
			t.pools.owner[k] = *poolIndex(&s.Rr)
		}
	}
	used := map[uint32]bool{}
	for _, i := range t.pools.owner {
		used[i] = true
	}
	for i := range uint32(pools) {
		if !used[i] {
			t.pools.free = append(t.pools.free, i)
		}
	}
	return t, nil
}

// tagSize is the stride of the hot index: an array map keeps each
// 8-byte value 8 bytes apart.
const tagSize = 8

// recTag is rec_tag of bpf/table.h: a set's entry in the hot index, its
// hash with the lowest bit set, so never 0, the mark of an empty slot.
func recTag(h uint64) uint64 { return h | 1 }

// setTag writes slot j's entry in the hot index from the slot's content:
// its set's tag, or 0 for an empty slot.
func (t *recordTable) setTag(j uint32, s *bpf.SteadydnsRecSlot) {
	var tag uint64
	if s.State == uint8(bpf.SteadydnsSlotStateSLOT_USED) {
		tag = recTag(s.Hash)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&t.tags[int(j)*tagSize])), tag)
}

// home is the slot a hash starts its probe at in the live region.
func (t *recordTable) home(h uint64) uint32 {
	if t.bits == 0 {
		return 0
	}
	return uint32(h >> (64 - t.bits))
}

// mask wraps a slot index to the live region.
func (t *recordTable) mask() uint32 { return uint32(1)<<t.bits - 1 }

func (t *recordTable) close() error {
	if t == nil || t.mem == nil {
		return nil
	}
	err := errors.Join(unix.Munmap(t.mem), unix.Munmap(t.tags), unix.Munmap(t.pools.mem))
	t.mem, t.tags, t.pools.mem = nil, nil, nil
	return err
}

// slot is slot j as the program reads it, in the mapping.
func (t *recordTable) slot(j uint32) *bpf.SteadydnsRecSlot {
	return (*bpf.SteadydnsRecSlot)(unsafe.Pointer(&t.mem[int(j)*slotSize]))
}

// slotName is the wire name of a slot: up to and including its root label.
func slotName(s *bpf.SteadydnsRecSlot) string {
	name := make([]byte, 0, len(s.NameHead)+len(s.NameTail))
	for _, part := range [][]int8{s.NameHead[:], s.NameTail[:]} {
		name = append(name, unsafe.Slice((*byte)(unsafe.Pointer(&part[0])), len(part))...)
	}
	n := 0
	for n < len(name) && name[n] != 0 {
		n += int(name[n]) + 1
	}
	return string(name[:min(n+1, len(name))])
}

func bytesOf(s *bpf.SteadydnsRecSlot) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s)), slotSize)
}

// write puts v into slot j under the slot's sequence count: odd while the
// bytes change, so a query reading the slot meanwhile sees the count odd
// or changed and leaves the set to the fallback. A pool's entry, p if not
// nil, is written within the same odd count. A write that would change
// nothing is skipped. The count itself is not copied from v. The slot's
// tag in the hot index follows its content: a query that finds the new
// tag finds the set written, and one that meets the old tag reads a slot
// whose hash or name is not its own and probes on.
func (t *recordTable) write(j uint32, v *bpf.SteadydnsRecSlot, p *pool) {
	dst := bytesOf(t.slot(j))
	src := bytesOf(v)
	if string(dst[4:]) == string(src[4:]) && (p == nil || t.pools.unchanged(p.index, p.entry)) {
		return
	}
	t.writes++
	seq := &t.slot(j).Seq
	// An odd count left by a writer that died mid-write is rounded down.
	base := atomic.LoadUint32(seq) &^ 1
	atomic.StoreUint32(seq, base+1)
	if p != nil {
		t.pools.store(p.index, p.entry)
	}
	storeOrdered(dst, src)
	atomic.StoreUint32(seq, base+2)
	t.setTag(j, v)
}

// storeOrdered copies src's words past the count into dst, each with an
// atomic store. A reader must not see a word of the new content while
// the count is still even from before, nor the even count after before
// every word: each store has to become visible after the one before it.
// x86 keeps stores in that order, but arm64 and riscv64 may let a plain
// store pass an earlier one, the odd count's included. Go's atomic
// stores are ordered after every earlier access on every architecture
// (a store-release, or a fence then a store), so storing each word that
// way orders it after the odd count and before the even one. The
// reader's half is slot_fence in bpf/table.h. A word that does not
// change is not stored: it cannot be read torn.
func storeOrdered(dst, src []byte) {
	word32 := func(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[0])) }
	word64 := func(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }
	if *word32(dst[4:]) != *word32(src[4:]) {
		atomic.StoreUint32(word32(dst[4:]), *word32(src[4:]))
	}
	for i := 8; i < len(dst); i += 8 {
		if w := *word64(src[i:]); *word64(dst[i:]) != w {
			atomic.StoreUint64(word64(dst[i:]), w)
		}
	}
}

// loadsOrdered reports whether the CPU keeps a load after every earlier
// load, as x86 does: the program's reads of a slot then need no fence
// (seq_fence in bpf/table.h).
func loadsOrdered() bool { return runtime.GOARCH == "amd64" || runtime.GOARCH == "386" }

// setSeqFence turns on the fences of the program's reads of the record
// table where the CPU needs them. It leaves the variable as it is on
// x86, where a test may turn them on to run them.
func setSeqFence(vars *bpf.SteadydnsVariableSpecs) error {
	if loadsOrdered() {
		return nil
	}
	if err := vars.SeqFence.Set(uint32(1)); err != nil {
		return fmt.Errorf("turning on the record table's fences: %w", err)
	}
	return nil
}

// encode puts the slot content of a set into s and returns, for a pool,
// its entry, to be written at index.
func encode(s *bpf.SteadydnsRecSlot, k RecordKey, h uint64, dist uint8, v *bpf.Set, index uint32) *pool {
	*s = bpf.SteadydnsRecSlot{State: uint8(bpf.SteadydnsSlotStateSLOT_USED), Dist: dist, Qtype: k.Qtype, Hash: h, Rr: v.SteadydnsRrset}
	var p *pool
	if v.Pool != nil {
		rr, entry := EncodePool(k.Qtype, v, index)
		s.Rr, p = rr, &pool{index, entry}
	}
	// The name's head lives in the slot's first cache line, the rest
	// after the set (struct rec_slot).
	for i, b := range k.Wire {
		if i < len(s.NameHead) {
			s.NameHead[i] = int8(b)
		} else {
			s.NameTail[i-len(s.NameHead)] = int8(b)
		}
	}
	if p != nil {
		return p
	}
	for i := range s.Rr.Cand {
		s.Rr.RrSum[i] = answerSum(k.Qtype, &s.Rr.Cand[i])
	}
	if s.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_STATIC) != 0 {
		pack(k.Qtype, &s.Rr)
	}
	return nil
}

// pack rewrites a static set's candidates as their addresses alone, back
// to back, the rest zero (struct rrset's packed): the program reads a
// static set's answers from there, and the set's first cache line holds
// eight A or two AAAA. Such a set has no check, backup or region to keep.
func pack(qtype uint16, v *bpf.SteadydnsRrset) {
	stride := int(bpf.SteadydnsLimitsSTATIC_STRIDE_AAAA)
	if qtype == 1 { // A
		stride = int(bpf.SteadydnsLimitsSTATIC_STRIDE_A)
	}
	var packed [unsafe.Sizeof(v.Cand)]byte
	for i := range min(int(v.N), len(v.Cand)) {
		copy(packed[i*stride:], v.Cand[i].Addr[:stride])
	}
	*(*[unsafe.Sizeof(v.Cand)]byte)(unsafe.Pointer(&v.Cand)) = packed
}

// answerSum is the rr_sum of a candidate: the ones-complement sum, in
// little-endian 16-bit words, of the answer record write_rr in
// bpf/steadydns.c writes for it, with the TTL left 0. The program adds the
// TTL and the rest of the reply; bpf's tests verify every reply's checksum.
func answerSum(qtype uint16, c *bpf.SteadydnsCandidate) uint16 {
	rdlen := 16
	if qtype == 1 { // A
		rdlen = 4
	}
	var room [12 + 16]byte
	rec := append(room[:0], 0xc0, 0x0c, byte(qtype>>8), byte(qtype), 0, 1, 0, 0, 0, 0, 0, byte(rdlen))
	rec = append(rec, c.Addr[:rdlen]...)
	var sum uint32
	for i := 0; i < len(rec); i += 2 {
		sum += uint32(rec[i]) | uint32(rec[i+1])<<8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// put inserts or replaces a set. A kept set is rewritten in place. A new
// one takes the first slot from its home whose set is nearer its own home
// (Robin Hood), and the sets it displaces move one slot on each; they are
// written from the end of the chain back, so every set stays readable
// somewhere along its probe while its copy moves. A pool keeps its pool
// entry, or takes a free one; a set that stops being a pool frees its
// entry once its slot no longer names it.
func (t *recordTable) put(k RecordKey, v *bpf.Set) error {
	if len(k.Wire) == 0 || len(k.Wire) > int(bpf.SteadydnsLimitsNAME_MAX_WIRE) {
		return fmt.Errorf("writing record set %q/%d: wire name of %d bytes", k.Wire, k.Qtype, len(k.Wire))
	}
	if v.Pool != nil && (int(v.N) > MaxPoolCandidates || len(v.Pool) > MaxPoolCandidates) {
		return fmt.Errorf("writing record set %q/%d: %d candidates, at most %d", k.Wire, k.Qtype, max(int(v.N), len(v.Pool)), MaxPoolCandidates)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, kept := t.index[k]
	if !kept && len(t.index) >= t.capacity {
		return fmt.Errorf("writing record set %q/%d: the table holds %d sets, its capacity", k.Wire, k.Qtype, t.capacity)
	}
	var index uint32
	if v.Pool != nil {
		var err error
		if index, err = t.pools.claim(k); err != nil {
			return err
		}
	}
	err := t.place(k, v, index)
	switch {
	case err != nil && !kept:
		t.pools.release(k)
	case err == nil && v.Pool == nil:
		t.pools.release(k)
	}
	return err
}

// place writes a set, v, whose pool entry is index if it is a pool, into
// its slot or, for a new one, into the table; t.mu is held.
func (t *recordTable) place(k RecordKey, v *bpf.Set, index uint32) error {
	if j, ok := t.index[k]; ok {
		h := t.heads[j]
		p := encode(&t.scratch, k, h.hash, h.dist, v, index)
		t.write(j, &t.scratch, p)
		return nil
	}
	if b := liveBits(len(t.index)+1, t.maxBits); b > t.bits {
		if err := t.resize(b); err != nil {
			return fmt.Errorf("writing record set %q/%d: %w", k.Wire, k.Qtype, err)
		}
	}
	mask := t.mask()
	h := NameHash(k.Wire, k.Qtype)
	home := t.home(h)
	// Plan the chain on copies first: a set pushed past PROBE_MAX must
	// leave the table as it was.
	type move struct {
		to   uint32
		head slotHead
	}
	var chain []move
	carry := slotHead{used: true, key: k, hash: h}
	for j := home; ; j = (j + 1) & mask {
		if int(carry.dist) >= probeMax {
			return fmt.Errorf("writing record set %q/%d: no free slot within %d of its home; the table is too full there", k.Wire, k.Qtype, probeMax)
		}
		cur := t.heads[j]
		if !cur.used {
			chain = append(chain, move{j, carry})
			break
		}
		if cur.dist < carry.dist {
			chain = append(chain, move{j, carry})
			carry = cur
		}
		carry.dist++
	}
	// The last move fills the empty slot; each earlier one overwrites a
	// set whose copy is already written further on.
	for i := len(chain) - 1; i >= 0; i-- {
		m := chain[i]
		var s *bpf.SteadydnsRecSlot
		var p *pool
		if m.head.key == k {
			s = &t.scratch
			p = encode(s, k, h, m.head.dist, v, index)
		} else {
			s = t.copyOf(t.index[m.head.key])
			s.Dist = m.head.dist
		}
		t.write(m.to, s, p)
		t.heads[m.to] = m.head
		t.index[m.head.key] = m.to
	}
	return nil
}

// copyOf is a copy of slot j's content.
func (t *recordTable) copyOf(j uint32) *bpf.SteadydnsRecSlot {
	s := new(bpf.SteadydnsRecSlot)
	copy(bytesOf(s)[4:], bytesOf(t.slot(j))[4:])
	return s
}

// remove deletes a set and shifts the sets after it, up to the next empty
// slot or set at home, one slot back (backward-shift deletion), so that no
// probe meets a gap before its set. A query probing for a shifted set
// while it moves may miss it and pass the query to the fallback.
func (t *recordTable) remove(k RecordKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.index[k]
	if !ok {
		return
	}
	delete(t.index, k)
	mask := t.mask()
	for {
		next := (j + 1) & mask
		n := t.heads[next]
		if !n.used || n.dist == 0 {
			break
		}
		s := t.copyOf(next)
		s.Dist--
		n.dist--
		t.write(j, s, nil)
		t.heads[j] = n
		t.index[n.key] = j
		j = next
	}
	t.write(j, &bpf.SteadydnsRecSlot{}, nil)
	t.heads[j] = slotHead{}
	// The set's slot holds another set now, or none.
	t.pools.release(k)
}

// place puts a set into heads on paper, from its home in a live region of
// mask + 1 slots, Robin Hood as put does, and reports whether it fits
// within PROBE_MAX of home.
func place(heads []slotHead, bits uint32, head slotHead) bool {
	mask := uint32(1)<<bits - 1
	j := uint32(head.hash >> (64 - bits))
	for head.dist = 0; ; j = (j + 1) & mask {
		if int(head.dist) >= probeMax {
			return false
		}
		if !heads[j].used {
			heads[j] = head
			return true
		}
		if heads[j].dist < head.dist {
			heads[j], head = head, heads[j]
		}
		head.dist++
	}
}

// resize moves every set into a live region of 1 << b slots and then
// tells the program its size. The new placement is planned on paper
// first, so a set that would not fit leaves the table as it was. Each set
// is written to its new slot under the slot's sequence count, following
// the chain of sets it displaces, so at most two are held in memory; the
// program still probes the old region meanwhile and may miss a set that
// moved, and then passes its queries to the fallback, which answers them
// the same. Slots left without a set are emptied last.
func (t *recordTable) resize(b uint32) error {
	heads := make([]slotHead, len(t.heads))
	for _, j := range t.index {
		if !place(heads, b, t.heads[j]) {
			return fmt.Errorf("resizing the record table to %d slots: a set lands more than %d slots from its home", 1<<b, probeMax)
		}
	}
	index := make(map[RecordKey]uint32, len(t.index))
	for j, h := range heads {
		if h.used {
			index[h.key] = uint32(j)
		}
	}
	moved := make(map[RecordKey]bool, len(t.index))
	for k, from := range t.index {
		if moved[k] {
			continue
		}
		cur, key := t.copyOf(from), k
		for {
			to := index[key]
			cur.Dist = heads[to].dist
			// The set now in the destination, not yet moved, goes next.
			old := t.heads[to]
			var next *bpf.SteadydnsRecSlot
			if old.used && old.key != key && !moved[old.key] {
				next = t.copyOf(to)
			}
			t.write(to, cur, nil)
			moved[key] = true
			if next == nil {
				break
			}
			cur, key = next, old.key
		}
	}
	if err := t.live.Put(uint32(0), b); err != nil {
		return fmt.Errorf("writing the record table's live size: %w", err)
	}
	for j := range uint32(1) << max(b, t.bits) {
		if !heads[j].used && t.slot(j).State != uint8(bpf.SteadydnsSlotStateSLOT_EMPTY) {
			t.write(j, &bpf.SteadydnsRecSlot{}, nil)
		}
	}
	t.heads, t.index, t.bits = heads, index, b
	return nil
}

// fit resizes the live region for n sets, if it is not the size for them.
func (t *recordTable) fit(n int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := liveBits(n, t.maxBits); b != t.bits {
		return t.resize(b)
	}
	return nil
}

// reserve makes an empty table's index room for n sets, so that a first
// load of millions does not grow it a power of two at a time.
func (t *recordTable) reserve(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.index) == 0 {
		t.index = make(map[RecordKey]uint32, n)
	}
}

// keys lists the sets in the table.
func (t *recordTable) keys() []RecordKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]RecordKey, 0, len(t.index))
	for k := range t.index {
		keys = append(keys, k)
	}
	return keys
}

// RecordCapacity is the number of record sets the table holds.
func (o *Objects) RecordCapacity() int { return o.records.capacity }

// PutRecord inserts or replaces a record set of up to MaxCandidates
// candidates. Each slot is written under its sequence count, so the
// program reads a set whole or not at all.
func (o *Objects) PutRecord(k RecordKey, v *bpf.SteadydnsRrset) error {
	return o.records.put(k, &bpf.Set{SteadydnsRrset: *v})
}

// PutSet is PutRecord for a set of any size: a pool's candidates go to
// the pool map, written with its slot.
func (o *Objects) PutSet(k RecordKey, v *bpf.Set) error {
	return o.records.put(k, v)
}

// DeleteRecord removes a record set; a missing one is not an error.
func (o *Objects) DeleteRecord(k RecordKey) error {
	o.records.remove(k)
	return nil
}

// RecordWrites is how many slots this process has written into the record
// table: a reload that changes a few sets writes those (and any its new
// sets displace), not the whole table.
func (o *Objects) RecordWrites() uint64 {
	o.records.mu.Lock()
	defer o.records.mu.Unlock()
	return o.records.writes
}

// RecordKeys lists the record sets now in the table.
func (o *Objects) RecordKeys() ([]RecordKey, error) {
	return o.records.keys(), nil
}

// SyncRecords makes the table hold exactly sets. It deletes the sets no
// longer wanted before it writes, so that the table never holds more than
// the larger of the old and the new count: new sets fit whenever they fit
// on their own. Sets that are no pools are written before the pools, so
// that a set that stops being one frees its entry first. A kept set is
// replaced in place and never missing (and not written at all when
// unchanged); a removed one only leaves a moment early, and XDP passes
// its queries to the fallback.
func (o *Objects) SyncRecords(sets map[RecordKey]*bpf.Set) error {
	if err := o.FitRecords(sets); err != nil {
		return err
	}
	for _, k := range o.records.keys() {
		if _, ok := sets[k]; !ok {
			o.records.remove(k)
		}
	}
	// One resize for the whole sync, not one per power of two crossed.
	if err := o.records.fit(len(sets)); err != nil {
		return fmt.Errorf("writing %d record sets: %w", len(sets), err)
	}
	o.records.reserve(len(sets))
	pools := 0
	for k, v := range sets {
		if v.Pool != nil {
			pools++
			continue
		}
		if err := o.records.put(k, v); err != nil {
			return err
		}
	}
	if pools == 0 {
		return nil // a zone of millions of sets has none: one walk
	}
	for k, v := range sets {
		if v.Pool != nil {
			if err := o.records.put(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// FitRecords reports whether sets fit the record table and the pool map,
// which SyncRecords checks before it changes anything.
func (o *Objects) FitRecords(sets map[RecordKey]*bpf.Set) error {
	if len(sets) > o.records.capacity {
		return fmt.Errorf("writing %d record sets: the table holds %d", len(sets), o.records.capacity)
	}
	pools := 0
	for _, v := range sets {
		if v.Pool != nil {
			pools++
		}
	}
	if c := o.records.pools.capacity(); pools > c {
		return fmt.Errorf("writing %d record sets of more than %d candidates: the pool map holds %d; a restart sizes it for them", pools, MaxCandidates, c)
	}
	return nil
}
