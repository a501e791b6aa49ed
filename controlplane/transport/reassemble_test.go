package transport

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// chunksOf returns the chunks Publish would send for payload.
func chunksOf(t *testing.T, kind Kind, slot, hash uint64, sender string, payload []byte, limit int) [][]byte {
	t.Helper()
	var out [][]byte
	_, err := encodeChunks(nil, kind, slot, hash, sender, payload, limit, func(_, _ int, c []byte) error {
		out = append(out, bytes.Clone(c))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func randomPayload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// collector keeps copies of the messages a reassembler delivers.
type collector struct{ got []Message }

func (c *collector) fn(m Message) {
	m.Payload = bytes.Clone(m.Payload)
	c.got = append(c.got, m)
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct{ n, limit, count, size int }{
		{0, 100, 1, 0},
		{1, 100, 1, 1},
		{100, 100, 1, 100},
		{101, 100, 2, 51},
		{200, 100, 2, 100},
		{201, 100, 3, 67},
		{65536*24 + 64, 1<<20 - HeaderSize, 2, (65536*24 + 64) / 2},
	} {
		count, size := Split(tc.n, tc.limit)
		if count != tc.count || size != tc.size {
			t.Errorf("Split(%d, %d) = %d, %d; want %d, %d", tc.n, tc.limit, count, size, tc.count, tc.size)
		}
		if count*size < tc.n || size > tc.limit {
			t.Errorf("Split(%d, %d) = %d chunks of %d bytes: does not fit", tc.n, tc.limit, count, size)
		}
	}
}

func TestReassembleInAnyOrder(t *testing.T) {
	for _, n := range []int{0, 1, 99, 100, 101, 1000, 65536 * 24} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			payload := randomPayload(n, uint64(n))
			chunks := chunksOf(t, KindFrame, 9, 77, "p1", payload, 100+n/7)
			rand.Shuffle(len(chunks), func(i, j int) { chunks[i], chunks[j] = chunks[j], chunks[i] })
			var c collector
			r := NewReassembler(KindFrame, Filter{}, c.fn)
			for i, ch := range chunks {
				if len(c.got) != 0 {
					t.Fatalf("delivered after %d of %d chunks", i, len(chunks))
				}
				r.Add(Subject(KindFrame, "c1", "p1"), ch)
			}
			if len(c.got) != 1 {
				t.Fatalf("delivered %d messages, want 1", len(c.got))
			}
			m := c.got[0]
			if m.Sender != "p1" || m.Slot != 9 || m.Hash != 77 || m.Kind != KindFrame || !bytes.Equal(m.Payload, payload) {
				t.Fatalf("got sender %q slot %d hash %d kind %v and %d bytes (equal: %v)", m.Sender, m.Slot, m.Hash, m.Kind,
					len(m.Payload), bytes.Equal(m.Payload, payload))
			}
			if got := r.Counters(); got.Used != uint64(len(chunks)) || got.Delivered != 1 {
				t.Fatalf("counters %+v", got)
			}
		})
	}
}

func TestLostChunkMakesTheSlotMissing(t *testing.T) {
	subj := Subject(KindTable, "c1", "a1")
	a := chunksOf(t, KindTable, 5, 1, "a1", randomPayload(1000, 1), 300) // 4 chunks
	b := chunksOf(t, KindTable, 6, 1, "a1", randomPayload(1000, 2), 300)
	var c collector
	r := NewReassembler(KindTable, Filter{}, c.fn)
	for i, ch := range a {
		if i != 2 { // lost
			r.Add(subj, ch)
		}
	}
	for _, ch := range b {
		r.Add(subj, ch)
	}
	r.Add(subj, a[2]) // the lost chunk, late: the slot is gone
	if len(c.got) != 1 || c.got[0].Slot != 6 {
		t.Fatalf("delivered %d messages (%v), want slot 6 only", len(c.got), c.got)
	}
	if got := r.Counters(); got.Missing != 1 || got.Late != 1 || got.Delivered != 1 {
		t.Fatalf("counters %+v, want 1 missing, 1 late, 1 delivered", got)
	}
}

func TestChunksOfOtherSlotsOrHashesNeverMix(t *testing.T) {
	subj := Subject(KindFrame, "c1", "p1")
	pa, pb, pc := randomPayload(900, 1), randomPayload(900, 2), randomPayload(900, 3)
	a := chunksOf(t, KindFrame, 7, 1, "p1", pa, 300) // slot 7, hash 1
	b := chunksOf(t, KindFrame, 7, 2, "p1", pb, 300) // slot 7, hash 2: another config
	cc := chunksOf(t, KindFrame, 8, 1, "p1", pc, 300)
	var c collector
	r := NewReassembler(KindFrame, Filter{}, c.fn)
	// Every chunk index is covered by one payload or another, so a
	// reassembler that keyed on the slot alone would deliver a mixture.
	for _, ch := range [][]byte{a[0], a[1], b[2], b[0], b[1], a[2], cc[0], a[0], cc[1], b[2], cc[2]} {
		r.Add(subj, ch)
	}
	want := map[uint64][]byte{2: pb, 1: pc}
	if len(c.got) != 2 {
		t.Fatalf("delivered %d messages, want 2 (hash 2 at slot 7, slot 8)", len(c.got))
	}
	for _, m := range c.got {
		if !bytes.Equal(m.Payload, want[m.Hash]) {
			t.Fatalf("slot %d hash %d: payload is not the one published", m.Slot, m.Hash)
		}
	}
	// Slot 7 under hash 1 is started twice (before and after hash 2's
	// payload) and never completed.
	if got := r.Counters(); got.Missing != 2 || got.Late != 2 {
		t.Fatalf("counters %+v, want 2 missing (slot 7, hash 1), 2 late", got)
	}
}

func TestDropped(t *testing.T) {
	payload := randomPayload(500, 4)
	good := chunksOf(t, KindFrame, 3, 1, "p1", payload, 200)
	corrupt := chunksOf(t, KindFrame, 4, 1, "p1", payload, 200)
	corrupt[1][HeaderSize+5] ^= 1
	for _, tc := range []struct {
		name    string
		subject string
		chunks  [][]byte
		want    func(Counters) uint64
	}{
		{"other config hash", Subject(KindFrame, "c1", "p1"), chunksOf(t, KindFrame, 3, 2, "p1", payload, 200), func(c Counters) uint64 { return c.Rejected }},
		{"kind not the subject's", Subject(KindFrame, "c1", "p1"), chunksOf(t, KindTable, 3, 1, "p1", payload, 200), func(c Counters) uint64 { return c.WrongKind }},
		{"sender not the subject's", Subject(KindFrame, "c1", "p2"), good, func(c Counters) uint64 { return c.WrongSender }},
		{"unknown subject", "steadydns.other.p1", good, func(c Counters) uint64 { return c.Malformed }},
		{"sender not in the config", Subject(KindFrame, "c1", "p9"), chunksOf(t, KindFrame, 3, 1, "p9", payload, 200), func(c Counters) uint64 { return c.Unknown }},
		{"sender of another cell", Subject(KindFrame, "c2", "p1"), good, func(c Counters) uint64 { return c.Unknown }},
		{"another length", Subject(KindFrame, "c1", "p1"), chunksOf(t, KindFrame, 3, 1, "p1", payload[:499], 200), func(c Counters) uint64 { return c.WrongLength }},
		{"slot ahead of the clock", Subject(KindFrame, "c1", "p1"), chunksOf(t, KindFrame, 11, 1, "p1", payload, 200), func(c Counters) uint64 { return c.Future }},
		{"truncated", Subject(KindFrame, "c1", "p1"), [][]byte{good[0][:HeaderSize-1], good[1][:len(good[1])-1]}, func(c Counters) uint64 { return c.Malformed }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c collector
			r := NewReassembler(KindFrame, Filter{
				Hash:    func(h uint64) bool { return h == 1 },
				Sender:  func(cell, sender string) bool { return cell == "c1" && (sender == "p1" || sender == "p2") },
				Length:  func() int { return 500 },
				MaxSlot: func() uint64 { return 10 },
			}, c.fn)
			for _, ch := range tc.chunks {
				r.Add(tc.subject, ch)
			}
			got := r.Counters()
			if len(c.got) != 0 || tc.want(got) != uint64(len(tc.chunks)) {
				t.Fatalf("delivered %d, counters %+v; want every chunk dropped under %q", len(c.got), got, tc.name)
			}
		})
	}
	t.Run("corrupt", func(t *testing.T) {
		var c collector
		r := NewReassembler(KindFrame, Filter{}, c.fn)
		for _, ch := range append(corrupt, corrupt[0]) {
			r.Add(Subject(KindFrame, "c1", "p1"), ch)
		}
		if got := r.Counters(); len(c.got) != 0 || got.Corrupt != 1 || got.Duplicate != 1 {
			t.Fatalf("delivered %d, counters %+v; want 1 corrupt, 1 duplicate", len(c.got), got)
		}
	})
}

// TestHostileHeaderMemory: a 73-byte chunk announcing 2^28 chunks of one
// byte, from a sender the receiver takes or from ever new ones, costs no
// assembly; a real message costs its length and one flag per chunk.
func TestHostileHeaderMemory(t *testing.T) {
	const length = 64 << 10
	var c collector
	r := NewReassembler(KindTable, Filter{
		Sender: func(_, sender string) bool { return sender == "a1" },
		Length: func() int { return length },
	}, c.fn)
	hostile := func(sender string, count, size uint32) []byte {
		b := make([]byte, HeaderSize+size)
		h := header{kind: KindTable, hash: 1, slot: 1, count: count, length: count * size, sender: sender}
		h.put(b)
		return b
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 1000 {
		r.Add(Subject(KindTable, "c1", "a1"), hostile("a1", 1<<28, 1))
		r.Add(Subject(KindTable, "c1", "a1"), hostile("a1", MaxChunks+1, length/MaxChunks))
		id := fmt.Sprintf("x%d", i)
		r.Add(Subject(KindTable, "c1", id), hostile(id, 1<<28, 1))
	}
	runtime.ReadMemStats(&after)
	if got := r.Counters(); got.WrongLength != 2000 || got.Unknown != 1000 || got.Used != 0 || len(r.senders) != 0 {
		t.Fatalf("counters %+v, %d assemblies; want every hostile chunk dropped before an assembly", got, len(r.senders))
	}
	// The log lines and subject parsing allocate a little; an assembly
	// would take 256 MiB.
	if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
		t.Fatalf("3000 hostile chunks allocated %d bytes", d)
	}
	for _, ch := range chunksOf(t, KindTable, 2, 1, "a1", randomPayload(length, 5), length/4) {
		r.Add(Subject(KindTable, "c1", "a1"), ch)
	}
	a := r.senders["c1.a1"]
	if len(c.got) != 1 || cap(a.buf) != length || cap(a.have) != 4 {
		t.Fatalf("delivered %d; the assembly holds %d bytes and %d flags, want %d and 4", len(c.got), cap(a.buf), cap(a.have), length)
	}
}
