package loader

import (
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
)

// MaxCandidates is K, the candidates a record set keeps in struct rrset
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
	probeMax   = int(bpf.SteadydnsLimitsPROBE_MAX)
	loadMaxPct = int(bpf.SteadydnsLimitsLOAD_MAX_PCT)
	slotSize   = int(unsafe.Sizeof(bpf.SteadydnsRecSlot{}))
)

// DefaultRecordCapacity is the record sets the object's table holds when
// Options.RecordCapacity is 0.
const DefaultRecordCapacity = 1 << 16

// minLive is the smallest live region, 1,024 slots (128 KiB): below it a
// resize would save nothing worth its moves.
const minLive = 1024

// TableSlots is the number of slots of a table for capacity record sets:
// enough that they fill at most LOAD_MAX_PCT percent, where every set
// lands within PROBE_MAX slots of its home.
func TableSlots(capacity uint32) uint32 {
	return max(uint32((uint64(capacity)*100+uint64(loadMaxPct)-1)/uint64(loadMaxPct)), minLive)
}

// TableBytes is the memory the kernel reserves for a table of capacity
// record sets, used or not.
func TableBytes(capacity uint32) uint64 {
	return uint64(TableSlots(capacity)) * uint64(slotSize)
}

// hashMul is HASH_MUL of bpf/dns.h.
const hashMul = 0x9E3779B97F4A7C15

// NameHash is name_hash, which hash_name in bpf/dns.h computes while it
// lowercases the query name: the slot a set goes to follows from the
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

// homeSlot is home_slot of bpf/table.h: the slot of a live region of
// size slots a hash starts its probe at.
func homeSlot(h uint64, size uint32) uint32 {
	return uint32((h >> 32) * uint64(size) >> 32)
}

// slotHead is what the loader keeps of each slot to place sets without
// reading the table back.
type slotHead struct {
	used bool
	dist uint8  // slots from its home
	seen uint32 // the last sync that asked for the set (recordTable.syncs)
	key  RecordKey
	hash uint64
}

// liveSize is the live region for n sets: enough slots that they fill
// 70% of it, leaving room to add sets before it must grow again at
// LOAD_MAX_PCT, at least minLive slots and at most the whole table's max.
func liveSize(n int, max uint32) uint32 {
	want := (uint64(n)*10 + 6) / 7
	if want < minLive {
		want = minLive
	}
	return uint32(min(want, uint64(max)))
}

// liveFits reports whether a live region of size slots suits n sets: at
// most LOAD_MAX_PCT percent full, and, unless it is the smallest, at
// least a third full, so that a zone that shrank gives its memory's
// pages back to the caches.
func liveFits(size uint32, n int, max uint32) bool {
	full := uint64(n)*100 <= uint64(size)*uint64(loadMaxPct) || size == max
	return full && (size <= minLive || uint64(n)*3 >= uint64(size))
}

// recordTable is the record map through its memory mapping, and the
// placement of every set in it. The sets sit in the table's first size
// slots, the live region, which grows and shrinks with their count; the
// rec_size map tells the program its size. pools and exts are the pool
// map (rec_pools) and the ext map (rec_exts), whose entries it writes
// with the slots that name them.
type recordTable struct {
	mu       sync.Mutex
	mem      []byte
	pools    *entryTable
	exts     *entryTable
	live     *ebpf.Map // rec_size
	size     uint32    // of the live region
	maxSize  uint32    // the whole table's slots
	capacity int
	heads    []slotHead // every slot of the table
	n        int        // sets in heads: placed, not spilled
	syncs    uint32     // counts SyncRecords, which marks the sets it keeps
	// spilled are the sets placed nowhere: each would have landed more
	// than PROBE_MAX slots from its home. XDP finds no slot for them and
	// passes their queries to the fallback, which answers them the same.
	spilled map[RecordKey]uint64
	// freed counts the removals and resizes that may have made room
	// since: a spilled set is placed again only once it has moved on
	// from the count it was spilled at, so that a full stretch does not
	// have two sets push each other out on every reload.
	freed  uint64
	writes uint64 // slots written since the table was opened, unchanged ones skipped
	// scratch is the slot put encodes a set into before writing it: one
	// for the table, not one allocated per set of a zone of millions.
	scratch bpf.SteadydnsRecSlot
}

// mapEntries maps an array map of n entries of size bytes.
func mapEntries(fd, n, size int, what string) ([]byte, error) {
	mem, err := unix.Mmap(fd, 0, n*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the %s: %w", what, err)
	}
	return mem, nil
}

// openRecordTable maps the records map, the pool map and the ext map,
// and reads the placement of the sets already in them, which pinned maps
// keep across restarts, with the size of its live region and the entries
// the sets name. The heads are rewritten from the slots, so they hold
// what the slots hold whatever an earlier process left.
func openRecordTable(fd, poolsFD, extsFD int, live *ebpf.Map, slots, capacity, pools, exts uint32) (*recordTable, error) {
	t := &recordTable{live: live, maxSize: slots, capacity: int(capacity), heads: make([]slotHead, slots), spilled: map[RecordKey]uint64{},
		pools: &entryTable{what: "pool", size: poolSize, owner: map[RecordKey]uint32{}},
		exts:  &entryTable{what: "ext", size: extSize, owner: map[RecordKey]uint32{}}}
	var err error
	if t.mem, err = mapEntries(fd, int(slots), slotSize, "record table"); err == nil {
		if t.pools.mem, err = mapEntries(poolsFD, int(pools), poolSize, "pool map"); err == nil {
			t.exts.mem, err = mapEntries(extsFD, int(exts), extSize, "ext map")
		}
	}
	if err != nil {
		t.close()
		return nil, err
	}
	var size uint32
	if err := live.Lookup(uint32(0), &size); err != nil {
		t.close()
		return nil, fmt.Errorf("reading the record table's live size: %w", err)
	}
	if size == 0 || size > t.maxSize {
		// A new table: no set yet, the smallest region.
		size = liveSize(0, t.maxSize)
		if err := live.Put(uint32(0), size); err != nil {
			t.close()
			return nil, fmt.Errorf("writing the record table's live size: %w", err)
		}
	}
	t.size = size
	for j := range size {
		s := t.slot(j)
		if s.State != uint8(bpf.SteadydnsSlotStateSLOT_USED) {
			continue
		}
		k := RecordKey{Wire: t.slotName(s), Qtype: s.Qtype}
		t.heads[j] = slotHead{used: true, dist: s.Dist, key: k, hash: s.Hash}
		t.n++
		if x := t.extOf(s); x != nil {
			t.exts.owner[k] = *extIndex(&s.Rr)
			if x.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_POOL) != 0 {
				t.pools.owner[k] = *poolIndex(&x.Rr)
			}
		}
	}
	t.pools.freeRest()
	t.exts.freeRest()
	return t, nil
}

// find is the slot holding k's set, probed for from its home as the
// program probes: past an empty slot, or a set nearer its own home than
// k's would be, k's set cannot lie (Robin Hood order).
func (t *recordTable) find(k RecordKey) (uint32, bool) {
	return findIn(t.heads, t.size, k, NameHash(k.Wire, k.Qtype))
}

// findIn is find in heads placed for a live region of size slots, for a
// set whose hash is h.
func findIn(heads []slotHead, size uint32, k RecordKey, h uint64) (uint32, bool) {
	j := homeSlot(h, size)
	for d := 0; d < probeMax; d++ {
		hd := &heads[j]
		if !hd.used || int(hd.dist) < d {
			break
		}
		if hd.hash == h && hd.key == k {
			return j, true
		}
		if j++; j == size {
			j = 0
		}
	}
	return 0, false
}

// home is the slot a hash starts its probe at in the live region.
func (t *recordTable) home(h uint64) uint32 { return homeSlot(h, t.size) }

// next is the slot after j in the live region, wrapping at its end.
func (t *recordTable) next(j uint32) uint32 {
	if j+1 < t.size {
		return j + 1
	}
	return 0
}

func (t *recordTable) close() error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, m := range []*[]byte{&t.mem, &t.pools.mem, &t.exts.mem} {
		if *m != nil {
			errs = append(errs, unix.Munmap(*m))
			*m = nil
		}
	}
	return errors.Join(errs...)
}

// slot is slot j as the program reads it, in the mapping.
func (t *recordTable) slot(j uint32) *bpf.SteadydnsRecSlot {
	return (*bpf.SteadydnsRecSlot)(unsafe.Pointer(&t.mem[int(j)*slotSize]))
}

// extIndex is the ext entry a slot's set names (struct rrset_head's ext,
// which shares its bytes with cand).
func extIndex(v *bpf.SteadydnsRrsetHead) *uint32 {
	return (*uint32)(unsafe.Pointer(&v.Cand))
}

// extOf is the ext entry slot s names, or nil for a set the slot holds.
func (t *recordTable) extOf(s *bpf.SteadydnsRecSlot) *bpf.SteadydnsRecExt {
	if s.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_EXT) == 0 {
		return nil
	}
	i := *extIndex(&s.Rr)
	if int(i) >= t.exts.capacity() {
		return nil
	}
	return (*bpf.SteadydnsRecExt)(unsafe.Pointer(&t.exts.entry(i)[0]))
}

// slotName is the wire name of slot s, up to and including its root
// label: its head, and for a longer name the tail in its ext entry.
func (t *recordTable) slotName(s *bpf.SteadydnsRecSlot) string {
	name := make([]byte, 0, int(bpf.SteadydnsLimitsNAME_MAX_WIRE)+1)
	name = append(name, unsafe.Slice((*byte)(unsafe.Pointer(&s.NameHead[0])), len(s.NameHead))...)
	if x := t.extOf(s); x != nil {
		name = append(name, unsafe.Slice((*byte)(unsafe.Pointer(&x.NameTail[0])), len(x.NameTail))...)
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
// or changed and leaves the set to the fallback. The set's pool and ext
// entries, p and x if not nil, are written within the same odd count. A
// write that would change nothing is skipped. The count itself is not
// copied from v.
func (t *recordTable) write(j uint32, v *bpf.SteadydnsRecSlot, x, p *entry) {
	dst := bytesOf(t.slot(j))
	src := bytesOf(v)
	if string(dst[4:]) == string(src[4:]) && t.exts.unchanged(x) && t.pools.unchanged(p) {
		return
	}
	t.writes++
	seq := &t.slot(j).Seq
	// An odd count left by a writer that died mid-write is rounded down.
	base := atomic.LoadUint32(seq) &^ 1
	atomic.StoreUint32(seq, base+1)
	if p != nil {
		t.pools.store(p)
	}
	if x != nil {
		t.exts.store(x)
	}
	storeOrdered(dst, src)
	atomic.StoreUint32(seq, base+2)
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
	if *word32(dst[4:]) != *word32(src[4:]) {
		atomic.StoreUint32(word32(dst[4:]), *word32(src[4:]))
	}
	storeWords(dst[8:], src[8:])
}

// storeWords copies src into dst a 64-bit word at a time, each changed
// word with an atomic store, in order (storeOrdered says why).
func storeWords(dst, src []byte) {
	for i := 0; i < len(dst); i += 8 {
		if w := *(*uint64)(unsafe.Pointer(&src[i])); *(*uint64)(unsafe.Pointer(&dst[i])) != w {
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[i])), w)
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

// encode puts the slot content of a set into s and returns its ext
// entry, to be written at ext, for a set that needs one (NeedsExt), and
// its pool entry, to be written at pool, for a pool. The slot keeps the
// set's fields either way, flagged RR_EXT with the entry's index for an
// ext set, whose entry holds the whole set and the name's tail.
func encode(s *bpf.SteadydnsRecSlot, k RecordKey, h uint64, dist uint8, v *bpf.Set, ext, pool uint32) (x, p *entry) {
	*s = bpf.SteadydnsRecSlot{State: uint8(bpf.SteadydnsSlotStateSLOT_USED), Dist: dist, Qtype: k.Qtype, Hash: h}
	rr := v.SteadydnsRrset
	if v.Pool != nil {
		var e *bpf.SteadydnsRecPool
		rr, e = EncodePool(k.Qtype, v, pool)
		p = &entry{pool, unsafe.Slice((*byte)(unsafe.Pointer(e)), poolSize)}
	} else {
		for i := range rr.Cand {
			rr.RrSum[i] = answerSum(k.Qtype, &rr.Cand[i])
		}
		if rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_STATIC) != 0 {
			pack(k.Qtype, &rr)
		}
	}
	// The slot's set is struct rrset's first bytes (struct rrset_head).
	head := unsafe.Slice((*byte)(unsafe.Pointer(&s.Rr)), unsafe.Sizeof(s.Rr))
	copy(head, unsafe.Slice((*byte)(unsafe.Pointer(&rr)), unsafe.Sizeof(rr)))
	wire := []byte(k.Wire)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&s.NameHead[0])), len(s.NameHead)), wire)
	if !NeedsExt(k, v) {
		return nil, p
	}
	e := new(bpf.SteadydnsRecExt)
	e.Rr = rr
	if len(wire) > nameHead {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&e.NameTail[0])), len(e.NameTail)), wire[nameHead:])
	}
	s.Rr.Flags |= uint8(bpf.SteadydnsRrsetFlagsRR_EXT)
	s.Rr.RrSum = [len(s.Rr.RrSum)]uint16{}
	s.Rr.Cand = [len(s.Rr.Cand)]bpf.SteadydnsCandidate{}
	*(*[8]byte)(unsafe.Pointer(uintptr(unsafe.Pointer(&s.Rr.Cand)) + unsafe.Sizeof(s.Rr.Cand))) = [8]byte{}
	*extIndex(&s.Rr) = ext
	return &entry{ext, unsafe.Slice((*byte)(unsafe.Pointer(e)), extSize)}, p
}

// pack rewrites a static set's candidates as their addresses alone, back
// to back, the rest zero (struct rrset's packed): the program reads a
// static set's answers from there, and the set's first cache line holds
// eight A or two AAAA. Such a set has no check, backup or region to keep.
func pack(qtype uint16, v *bpf.SteadydnsRrset) {
	stride := staticStride(qtype)
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
// somewhere along its probe while its copy moves. A set that needs an ext
// or a pool entry keeps its own, or takes a free one; a set that stops
// needing one frees it once its slot no longer names it.
func (t *recordTable) put(k RecordKey, v *bpf.Set) error {
	if len(k.Wire) == 0 || len(k.Wire) > int(bpf.SteadydnsLimitsNAME_MAX_WIRE) {
		return fmt.Errorf("writing record set %q/%d: wire name of %d bytes", k.Wire, k.Qtype, len(k.Wire))
	}
	if v.Pool != nil && (int(v.N) > MaxPoolCandidates || len(v.Pool) > MaxPoolCandidates) {
		return fmt.Errorf("writing record set %q/%d: %d candidates, at most %d", k.Wire, k.Qtype, max(int(v.N), len(v.Pool)), MaxPoolCandidates)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.spilled[k]; ok && at == t.freed {
		return nil
	}
	at, kept := t.find(k)
	_, spilled := t.spilled[k]
	if !kept && !spilled && t.n+len(t.spilled) >= t.capacity {
		return fmt.Errorf("writing record set %q/%d: the table holds %d sets, its capacity", k.Wire, k.Qtype, t.capacity)
	}
	var ext, pool uint32
	var err error
	needExt := NeedsExt(k, v)
	if needExt {
		ext, err = t.exts.claim(k)
	}
	if err == nil && v.Pool != nil {
		pool, err = t.pools.claim(k)
	}
	if err == nil {
		err = t.place(k, v, at, kept, ext, pool)
	}
	if err != nil && !kept {
		t.exts.release(k)
		t.pools.release(k)
	}
	if err == nil && !needExt {
		t.exts.release(k)
	}
	if err == nil && v.Pool == nil {
		t.pools.release(k)
	}
	return err
}

// place writes a set, v, whose ext and pool entries are ext and pool if
// it needs them, into its slot j if kept or, for a new one, into the
// table; t.mu is held.
func (t *recordTable) place(k RecordKey, v *bpf.Set, j uint32, kept bool, ext, pool uint32) error {
	if kept {
		h := t.heads[j]
		x, p := encode(&t.scratch, k, h.hash, h.dist, v, ext, pool)
		t.write(j, &t.scratch, x, p)
		return nil
	}
	// A set added only ever grows the region, to twice its sets, so that
	// sets added one by one move each set a few times in all, not once
	// per growth of a seventh; a sync sizes it for its sets at once (fit).
	if n := t.n + 1; !liveFits(t.size, n, t.maxSize) && uint64(n)*100 > uint64(t.size)*uint64(loadMaxPct) {
		if err := t.resize(liveSize(2*n, t.maxSize)); err != nil {
			return fmt.Errorf("writing record set %q/%d: %w", k.Wire, k.Qtype, err)
		}
	}
	h := NameHash(k.Wire, k.Qtype)
	home := t.home(h)
	// Plan the chain on copies first: a set pushed past PROBE_MAX must
	// leave the table as it was. A chain is a few moves, planned on the
	// stack: a zone of millions places millions of sets.
	type move struct {
		to   uint32
		head slotHead
	}
	var moves [probeMax + 1]move
	chain := moves[:0]
	carry := slotHead{used: true, key: k, hash: h}
	var spill RecordKey
	spilled := false
	for j := home; ; j = t.next(j) {
		if int(carry.dist) >= probeMax {
			// The set carried this far would land past PROBE_MAX: it
			// goes to no slot, and the fallback answers it.
			spill, spilled = carry.key, true
			break
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
	if spilled {
		t.spill(spill)
		if spill != k {
			t.n-- // pushed out of its slot by k's
		}
	}
	if len(chain) > 0 {
		t.n++
	}
	// The last move fills the empty slot, or that of the set spilled;
	// each earlier one overwrites a set whose copy is already written
	// further on.
	for i := len(chain) - 1; i >= 0; i-- {
		m := chain[i]
		s := &t.scratch
		var x, p *entry
		if i == 0 { // k's set, which the chain starts with
			x, p = encode(s, k, h, m.head.dist, v, ext, pool)
		} else { // the set k's pushed on, from the slot the move before fills
			copySlot(s, t.slot(chain[i-1].to))
			s.Dist = m.head.dist
		}
		t.write(m.to, s, x, p)
		t.heads[m.to] = m.head
	}
	if len(chain) > 0 {
		delete(t.spilled, k)
	}
	return nil
}

// spill records k's set as placed nowhere and frees its entries: its
// slot, if it had one, is written over by the chain that pushed it out.
func (t *recordTable) spill(k RecordKey) {
	t.spilled[k] = t.freed
	t.exts.release(k)
	t.pools.release(k)
}

// copyOf is a copy of slot j's content.
func (t *recordTable) copyOf(j uint32) *bpf.SteadydnsRecSlot {
	s := new(bpf.SteadydnsRecSlot)
	copySlot(s, t.slot(j))
	return s
}

// copySlot copies src's content, all but its count, into dst.
func copySlot(dst, src *bpf.SteadydnsRecSlot) { copy(bytesOf(dst)[4:], bytesOf(src)[4:]) }

// remove deletes a set and shifts the sets after it, up to the next empty
// slot or set at home, one slot back (backward-shift deletion), so that no
// probe meets a gap before its set. A query probing for a shifted set
// while it moves may miss it and pass the query to the fallback.
func (t *recordTable) remove(k RecordKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.spilled, k)
	j, ok := t.find(k)
	if !ok {
		return
	}
	t.n--
	t.freed++
	for {
		next := t.next(j)
		n := t.heads[next]
		if !n.used || n.dist == 0 {
			break
		}
		s := t.copyOf(next)
		s.Dist--
		n.dist--
		t.write(j, s, nil, nil)
		t.heads[j] = n
		j = next
	}
	t.write(j, &bpf.SteadydnsRecSlot{}, nil, nil)
	t.heads[j] = slotHead{}
	// The set's slot holds another set now, or none.
	t.exts.release(k)
	t.pools.release(k)
}

// place puts a set into heads on paper, from its home in a live region of
// size slots, Robin Hood as put does. It returns the set that would land
// past PROBE_MAX of its home, which goes nowhere, if any.
func place(heads []slotHead, size uint32, head slotHead) (spilled *slotHead) {
	j := homeSlot(head.hash, size)
	for head.dist = 0; ; j = (j + 1) % size {
		if int(head.dist) >= probeMax {
			return &head
		}
		if !heads[j].used {
			heads[j] = head
			return nil
		}
		if heads[j].dist < head.dist {
			heads[j], head = head, heads[j]
		}
		head.dist++
	}
}

// resize moves every set into a live region of size slots and then
// tells the program its size. The new placement is planned on paper
// first; a set that would land past PROBE_MAX is spilled. Each set
// is written to its new slot under the slot's sequence count, following
// the chain of sets it displaces, so at most two are held in memory; the
// program still probes the old region meanwhile and may miss a set that
// moved, and then passes its queries to the fallback, which answers them
// the same. Slots left without a set are emptied last.
func (t *recordTable) resize(size uint32) error {
	heads := t.heads
	if t.n > 0 {
		// Planned apart from the heads the sets move from. An empty
		// table, as a first load finds it, plans nothing and keeps its
		// heads: a table of millions of slots has heads of many MB.
		heads = make([]slotHead, len(t.heads))
	}
	var spilled []RecordKey
	for j := range t.size {
		if t.heads[j].used {
			if h := place(heads, size, t.heads[j]); h != nil {
				spilled = append(spilled, h.key)
			}
		}
	}
	// to is where the set of a head goes, false for one spilled.
	to := func(h slotHead) (uint32, bool) { return findIn(heads, size, h.key, h.hash) }
	moved := make([]bool, t.size) // by the slot a set leaves
	for from := range t.size {
		if !t.heads[from].used || moved[from] {
			continue
		}
		dst, ok := to(t.heads[from])
		if !ok {
			continue
		}
		cur, at := t.copyOf(from), from
		for {
			cur.Dist = heads[dst].dist
			// The set now in the destination, not yet moved, goes next,
			// unless it is spilled.
			old := t.heads[dst]
			var next *bpf.SteadydnsRecSlot
			var nextDst uint32
			if old.used && dst != at && !moved[dst] {
				var placed bool
				if nextDst, placed = to(old); placed {
					next = t.copyOf(dst)
				}
			}
			t.write(dst, cur, nil, nil)
			moved[at] = true
			if next == nil {
				break
			}
			cur, at, dst = next, dst, nextDst
		}
	}
	for _, k := range spilled {
		t.spill(k)
	}
	if err := t.live.Put(uint32(0), size); err != nil {
		return fmt.Errorf("writing the record table's live size: %w", err)
	}
	for j := range max(size, t.size) {
		if !heads[j].used && t.slot(j).State != uint8(bpf.SteadydnsSlotStateSLOT_EMPTY) {
			t.write(j, &bpf.SteadydnsRecSlot{}, nil, nil)
		}
	}
	t.heads, t.size = heads, size
	t.n -= len(spilled)
	t.freed++
	return nil
}

// fit resizes the live region for n sets, if it does not suit them.
func (t *recordTable) fit(n int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !liveFits(t.size, n, t.maxSize) {
		return t.resize(liveSize(n, t.maxSize))
	}
	return nil
}

// keys lists the sets in the table, and those spilled.
func (t *recordTable) keys() []RecordKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]RecordKey, 0, t.n+len(t.spilled))
	for _, h := range t.heads[:t.size] {
		if h.used {
			keys = append(keys, h.key)
		}
	}
	for k := range t.spilled {
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

// RecordsSpilled is how many record sets have no slot, each of which
// would have landed more than PROBE_MAX slots from its home: XDP passes
// their queries to the fallback. A few in ten thousand at the table's
// fullest, none while it has room.
func (o *Objects) RecordsSpilled() int {
	o.records.mu.Lock()
	defer o.records.mu.Unlock()
	return len(o.records.spilled)
}

// Spilled reports whether k's set is spilled: in no slot.
func (o *Objects) Spilled(k RecordKey) bool {
	o.records.mu.Lock()
	defer o.records.mu.Unlock()
	_, ok := o.records.spilled[k]
	return ok
}

// RecordKeys lists the record sets now in the table, spilled ones included.
func (o *Objects) RecordKeys() ([]RecordKey, error) {
	return o.records.keys(), nil
}

// SyncRecords makes the table hold exactly sets, which yields each key
// once and is walked several times. It deletes the sets no
// longer wanted before it writes, so that the table never holds more than
// the larger of the old and the new count: new sets fit whenever they fit
// on their own. Sets a slot holds are written first, then the other sets
// that are no pools, then the pools, so that a set that stops needing an
// ext or pool entry frees it before another claims one. A kept set is
// replaced in place and never missing (and not written at all when
// unchanged); a removed one only leaves a moment early, and XDP passes
// its queries to the fallback.
func (o *Objects) SyncRecords(sets iter.Seq2[RecordKey, *bpf.Set]) error {
	n, err := o.fitRecords(sets)
	if err != nil {
		return err
	}
	for _, k := range o.records.unwanted(sets) {
		o.records.remove(k)
	}
	// One resize for the whole sync, not one per step crossed.
	if err := o.records.fit(n); err != nil {
		return fmt.Errorf("writing %d record sets: %w", n, err)
	}
	later := 0
	for k, v := range sets {
		if NeedsExt(k, v) {
			later++
			continue
		}
		if err := o.records.put(k, v); err != nil {
			return err
		}
	}
	if later == 0 {
		return nil // a zone of millions of small sets has none: one walk
	}
	for _, pools := range []bool{false, true} {
		for k, v := range sets {
			if NeedsExt(k, v) && (v.Pool != nil) == pools {
				if err := o.records.put(k, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// unwanted lists the sets in the table, spilled ones included, that sets
// does not hold. It marks each set sets holds with the sync's count
// rather than index sets by key: for a zone of millions that index would
// cost seconds and hundreds of megabytes.
func (t *recordTable) unwanted(sets iter.Seq2[RecordKey, *bpf.Set]) []RecordKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.syncs++
	var spilled map[RecordKey]bool
	for k := range sets {
		if j, ok := t.find(k); ok {
			t.heads[j].seen = t.syncs
		} else if _, ok := t.spilled[k]; ok {
			if spilled == nil {
				spilled = map[RecordKey]bool{}
			}
			spilled[k] = true
		}
	}
	var out []RecordKey
	for _, h := range t.heads[:t.size] {
		if h.used && h.seen != t.syncs {
			out = append(out, h.key)
		}
	}
	for k := range t.spilled {
		if !spilled[k] {
			out = append(out, k)
		}
	}
	return out
}

// FitRecords reports whether sets fit the record table, the ext map and
// the pool map, which SyncRecords checks before it changes anything.
func (o *Objects) FitRecords(sets iter.Seq2[RecordKey, *bpf.Set]) error {
	_, err := o.fitRecords(sets)
	return err
}

// fitRecords is FitRecords, returning the number of sets.
func (o *Objects) fitRecords(sets iter.Seq2[RecordKey, *bpf.Set]) (int, error) {
	n, pools, exts := 0, 0, 0
	for k, v := range sets {
		n++
		if v.Pool != nil {
			pools++
		}
		if NeedsExt(k, v) {
			exts++
		}
	}
	if n > o.records.capacity {
		return n, fmt.Errorf("writing %d record sets: the table holds %d", n, o.records.capacity)
	}
	if c := o.records.pools.capacity(); pools > c {
		return n, fmt.Errorf("writing %d record sets of more than %d candidates: the pool map holds %d; a restart sizes it for them", pools, MaxCandidates, c)
	}
	if c := o.records.exts.capacity(); exts > c {
		return n, fmt.Errorf("writing %d record sets that need an ext entry: the ext map holds %d; a restart sizes it for them", exts, c)
	}
	return n, nil
}
