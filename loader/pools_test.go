package loader

import (
	"fmt"
	"maps"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

func TestPoolsFor(t *testing.T) {
	for _, c := range []struct {
		n    int
		want uint32
	}{{0, 16}, {1, 16}, {8, 16}, {9, 32}, {16, 32}, {17, 64}, {1000, 2048}} {
		if got := PoolsFor(c.n); got != c.want {
			t.Errorf("PoolsFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// poolSet is a pool of n candidates whose addresses and checks carry tag.
func poolSet(n int, tag byte) *bpf.Set {
	v := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, N: uint8(n), MaxAnswers: 8}, Pool: make([]bpf.SteadydnsCandidate, n)}
	for i := range v.Pool {
		v.Pool[i].Addr = [16]byte{198, 18, tag, byte(i)}
		v.Pool[i].Check = uint32(tag)<<8 | uint32(i)
	}
	return v
}

// pooled reads k's set as the program does: its slot, flagged RR_POOL,
// and the pool entry it names, which must hold its candidates.
func pooled(t *testing.T, o *Objects, k RecordKey, want *bpf.Set) uint32 {
	t.Helper()
	s, ok := probe(t, o, k)
	if !ok {
		t.Fatalf("%q/%d not found", k.Wire, k.Qtype)
	}
	x := o.records.extOf(s)
	if x == nil || x.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_POOL) == 0 || x.Rr.N != want.N || s.Rr.N != want.N {
		t.Fatalf("%q/%d: slot flags %#x, want RR_EXT and an ext entry flagged RR_POOL with n %d", k.Wire, k.Qtype, s.Rr.Flags, want.N)
	}
	i := *poolIndex(&x.Rr)
	var p bpf.SteadydnsRecPool
	if err := o.RecPools.Lookup(i, &p); err != nil {
		t.Fatalf("%q/%d: pool entry %d: %v", k.Wire, k.Qtype, i, err)
	}
	for j, c := range want.Pool {
		if p.Cand[j] != c || p.RrSum[j] != answerSum(k.Qtype, &c) {
			t.Fatalf("%q/%d: pool entry %d, candidate %d: %+v sum %#x, want %+v", k.Wire, k.Qtype, i, j, p.Cand[j], p.RrSum[j], c)
		}
	}
	for j := len(want.Pool); j < len(p.Cand); j++ {
		if p.Cand[j] != (bpf.SteadydnsCandidate{}) {
			t.Fatalf("%q/%d: pool entry %d holds candidate %d past its %d", k.Wire, k.Qtype, i, j, len(want.Pool))
		}
	}
	return i
}

// TestPools writes pools beside sets in their slots: each names an entry
// of the pool map of its own, holding its candidates; a pool rewritten
// keeps its entry, one that shrinks into its slot frees it, a deleted one
// frees it for the next; more pools than the map holds are refused, by
// SyncRecords before it changes anything; a second Load reads the
// entries back.
func TestPools(t *testing.T) {
	requireRoot(t)
	dir := mountTestFS(t) + "/sd"
	opts := Options{BPFFS: dir, RecordCapacity: 64, PoolCapacity: 4}
	o, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.PoolCapacity() != 4 {
		t.Fatalf("pool capacity %d, want 4", o.PoolCapacity())
	}
	key := func(i int) RecordKey { return RecordKey{Wire: wire(fmt.Sprintf("p%d", i)), Qtype: 1} }
	sets := map[RecordKey]*bpf.Set{}
	for i := range 4 {
		sets[key(i)] = poolSet(9+i*18, byte(i))
	}
	sets[RecordKey{Wire: wire("small"), Qtype: 1}] = &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, N: 1}}
	if err := o.SyncRecords(maps.All(sets)); err != nil {
		t.Fatal(err)
	}
	entries := map[uint32]bool{}
	for i := range 4 {
		entries[pooled(t, o, key(i), sets[key(i)])] = true
	}
	if len(entries) != 4 {
		t.Fatalf("4 pools share %d entries", len(entries))
	}
	if s, _ := probe(t, o, RecordKey{Wire: wire("small"), Qtype: 1}); s.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_POOL) != 0 {
		t.Fatal("a set of one is flagged a pool")
	}

	// Rewritten, a pool keeps its entry.
	before := pooled(t, o, key(0), sets[key(0)])
	sets[key(0)] = poolSet(64, 9)
	if err := o.PutSet(key(0), sets[key(0)]); err != nil {
		t.Fatal(err)
	}
	if got := pooled(t, o, key(0), sets[key(0)]); got != before {
		t.Errorf("a rewritten pool moved from entry %d to %d", before, got)
	}
	// Full: a fifth pool is refused, by SyncRecords before any write.
	if err := o.PutSet(key(4), poolSet(10, 4)); err == nil {
		t.Error("a fifth pool was written into a pool map of four")
	}
	sets[key(4)] = poolSet(10, 4)
	if err := o.SyncRecords(maps.All(sets)); err == nil {
		t.Error("SyncRecords wrote five pools into a pool map of four")
	}
	delete(sets, key(4))
	if _, ok := probe(t, o, key(4)); ok {
		t.Error("a refused pool is in the table")
	}
	// A pool that shrinks into its slot frees its entry; a deleted one
	// too; the next pools take them.
	freed := pooled(t, o, key(1), sets[key(1)])
	sets[key(1)] = &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, N: 2}}
	gone := pooled(t, o, key(2), sets[key(2)])
	delete(sets, key(2))
	sets[key(5)], sets[key(6)] = poolSet(33, 5), poolSet(40, 6)
	if err := o.SyncRecords(maps.All(sets)); err != nil {
		t.Fatal(err)
	}
	if s, _ := probe(t, o, key(1)); s.Rr.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_POOL) != 0 {
		t.Error("a pool shrunk to two candidates is still flagged a pool")
	}
	got := map[uint32]bool{pooled(t, o, key(5), sets[key(5)]): true, pooled(t, o, key(6), sets[key(6)]): true}
	if !got[freed] || !got[gone] {
		t.Errorf("new pools took entries %v, want the freed %d and %d", got, freed, gone)
	}

	again, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for _, i := range []int{0, 3, 5, 6} {
		pooled(t, again, key(i), sets[key(i)])
	}
	if n := len(again.records.pools.free); n != 0 {
		t.Errorf("reloaded: %d free pool entries, want 0 with four pools", n)
	}
}
