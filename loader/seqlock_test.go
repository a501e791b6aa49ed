package loader

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/steadydns/steadydns/bpf"
)

// slotWords reads a slot as the program does, under its count: the count,
// every word past it, the count again. ok is false when the count was odd
// or moved, where the program leaves the set to the fallback.
func slotWords(s []byte, words []uint64) (seq uint32, ok bool) {
	seqp := (*uint32)(unsafe.Pointer(&s[0]))
	seq = atomic.LoadUint32(seqp)
	for i := range words {
		words[i] = atomic.LoadUint64((*uint64)(unsafe.Pointer(&s[8+8*i])))
	}
	return seq, seq&1 == 0 && atomic.LoadUint32(seqp) == seq
}

// TestSlotWrite: a write moves a slot's count by two, to an even count,
// and leaves its bytes the set's; an unchanged set is not written; an odd
// count, a writer's that died mid-write, is rounded down.
func TestSlotWrite(t *testing.T) {
	mem := make([]uint64, 2*slotSize/8) // aligned, as the mapping is
	tab := &recordTable{mem: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 2*slotSize), exts: &entryTable{size: extSize}, pools: &entryTable{size: poolSize}}
	v := new(bpf.SteadydnsRecSlot)
	encode(v, RecordKey{Wire: wire("a"), Qtype: 1}, 7, 0, &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{Ttl: 60, N: 1}}, 0, 0)
	for i, c := range []struct {
		ttl       uint32
		seq, want uint32
	}{{60, 0, 2}, {60, 2, 2}, {61, 2, 4}, {62, 5, 6}} {
		tab.slot(1).Seq = c.seq
		v.Rr.Ttl = c.ttl
		tab.write(1, v, nil, nil)
		s := tab.slot(1)
		if s.Seq != c.want {
			t.Errorf("write %d: count %d, want %d", i, s.Seq, c.want)
		}
		if string(bytesOf(s)[4:]) != string(bytesOf(v)[4:]) {
			t.Errorf("write %d: the slot is not the set written", i)
		}
	}
	if tab.slot(0).Seq != 0 || tab.slot(0).State != 0 {
		t.Error("a write to slot 1 changed slot 0")
	}
}

// TestSlotWriteOrdered: a reader following the program's protocol
// (slotWords) while the loader rewrites a slot between two sets never
// takes a mix of the two for a set. Each set's words all carry its own
// mark, so a mix shows in any word. Under the race detector, a plain
// store of the writer's fails it too, on any CPU.
func TestSlotWriteOrdered(t *testing.T) {
	mem := make([]uint64, slotSize/8)
	tab := &recordTable{mem: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), slotSize), exts: &entryTable{size: extSize}, pools: &entryTable{size: poolSize}}
	var sets [2]bpf.SteadydnsRecSlot
	for i := range sets {
		b := bytesOf(&sets[i])
		for j := 4; j < len(b); j++ {
			b[j] = byte(0x11 * (i + 1))
		}
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !done.Load(); i++ {
			tab.write(0, &sets[i&1], nil, nil)
		}
	})
	words := make([]uint64, (slotSize-8)/8)
	read := 0
	for n := 0; read < 20000 && n < 10_000_000; n++ {
		if _, ok := slotWords(tab.mem, words); !ok {
			continue
		}
		read++
		for i, w := range words {
			if w != words[0] {
				done.Store(true)
				wg.Wait()
				t.Fatalf("read a mix: word %d is %#x, word 0 %#x", i+1, w, words[0])
			}
		}
	}
	done.Store(true)
	wg.Wait()
	if read == 0 {
		t.Fatal("no read found the slot whole")
	}
}
