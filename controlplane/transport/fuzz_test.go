package transport

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"testing"
)

// publication is one payload as a sender publishes it, and its chunks.
type publication struct {
	cell, sender string
	slot, hash   uint64
	payload      []byte
	chunks       [][]byte
}

func (p *publication) key() string {
	return fmt.Sprintf("%s.%s/%d/%d", p.cell, p.sender, p.slot, p.hash)
}

// FuzzReassemble gives a reassembler chunks in any order, any number of
// times, with bytes changed and between chunks made up whole. Publications
// of two senders in two cells, of two slots and two config hashes (one
// that the receiver refuses), some in one chunk and some in several, are
// what the script picks from. The reassembler never panics, never
// delivers a payload under a publication's sender, slot and hash other
// than that publication's own (no mixing of slots, hashes or senders),
// counts every chunk in exactly one of its outcomes, and counts each
// delivery once. A second reassembler, fed the same chunks, takes only
// 40-byte payloads of cell c1 up to slot 2: it delivers nothing else and
// never holds more than one payload's length and MaxChunks flags per
// sender it takes, whatever the headers announce.
//
// The script is a list of operations, each a byte and its operands:
//
//	0 p i     add chunk i of publication p
//	1 p i o v add it with data byte o (or an index, magic or format byte) set to v
//	2 s n ... add n bytes as a chunk on subject s
func FuzzReassemble(f *testing.F) {
	var pubs []*publication
	add := func(cell, sender string, slot, hash uint64, n, limit int) {
		p := &publication{cell: cell, sender: sender, slot: slot, hash: hash, payload: randomPayload(n, slot*31+hash+uint64(n))}
		_, err := encodeChunks(nil, KindFrame, slot, hash, sender, p.payload, limit, func(_, _ int, c []byte) error {
			p.chunks = append(p.chunks, bytes.Clone(c))
			return nil
		})
		if err != nil {
			f.Fatal(err)
		}
		pubs = append(pubs, p)
	}
	add("c1", "p1", 1, 7, 40, 16) // 3 chunks
	add("c1", "p1", 1, 8, 40, 16) // same slot, another config
	add("c1", "p1", 2, 7, 33, 11) // the next slot, 3 chunks of another size
	add("c1", "p2", 1, 7, 40, 16)
	add("c2", "p1", 1, 7, 5, 100) // the same sender in another cell, one chunk
	add("c1", "p2", 2, 9, 8, 4)   // a refused config
	add("c1", "p2", 3, 7, 0, 16)  // empty
	byKey := map[string]*publication{}
	for _, p := range pubs {
		byKey[p.key()] = p
	}
	// The first subjects are of these cells, in order.
	cells := []string{"c1", "c1", "c2"}
	subjects := []string{Subject(KindFrame, "c1", "p1"), Subject(KindFrame, "c1", "p2"), Subject(KindFrame, "c2", "p1"),
		Subject(KindTable, "c1", "p1"), "steadydns.frame", "nonsense"}

	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 2})
	f.Add([]byte{0, 0, 2, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0})
	f.Add([]byte{0, 2, 0, 0, 0, 0, 0, 2, 1, 0, 2, 2, 0, 0, 1})
	f.Add([]byte{0, 4, 0, 0, 4, 0, 0, 5, 0, 0, 5, 1, 0, 6, 0})
	f.Add([]byte{1, 0, 0, 80, 1, 0, 0, 1, 0, 0, 2, 1, 0, 2, 24, 9})
	f.Add([]byte{2, 0, 72, 0x53, 0x44, 0x54, 0x43, 1, 1, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 'p', '1', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})

	f.Fuzz(func(t *testing.T, script []byte) {
		var delivered, bounded []Message
		r := NewReassembler(KindFrame, Filter{Hash: func(h uint64) bool { return h != 9 }}, func(m Message) {
			m.Payload = bytes.Clone(m.Payload)
			delivered = append(delivered, m)
		})
		rb := NewReassembler(KindFrame, Filter{
			Sender:  func(cell, _ string) bool { return cell == "c1" },
			Length:  func() int { return 40 },
			MaxSlot: func() uint64 { return 2 },
		}, func(m Message) { bounded = append(bounded, m) })
		add := func(subject string, chunk []byte) {
			r.Add(subject, chunk)
			rb.Add(subject, bytes.Clone(chunk))
		}
		next := func() int {
			if len(script) == 0 {
				return 0
			}
			b := script[0]
			script = script[1:]
			return int(b)
		}
		adds := 0
		forged := map[string]bool{} // publications a made-up chunk claimed to be of
		for len(script) > 0 {
			switch next() % 3 {
			case 0:
				p := pubs[next()%len(pubs)]
				add(Subject(KindFrame, p.cell, p.sender), p.chunks[next()%len(p.chunks)])
			case 1:
				p := pubs[next()%len(pubs)]
				c := bytes.Clone(p.chunks[next()%len(p.chunks)])
				// Only bytes that do not say which publication a chunk
				// is of: magic, format, index, and the data.
				editable := append([]int{0, 1, 2, 3, 4, 24, 25, 26, 27}, dataOffsets(len(c))...)
				o, v := editable[next()%len(editable)], byte(next())
				c[o] = v
				add(Subject(KindFrame, p.cell, p.sender), c)
			case 2:
				k := next() % len(subjects)
				n := min(next(), len(script))
				var h header
				if _, err := h.parse(script[:n]); err == nil && k < len(cells) {
					forged[fmt.Sprintf("%s.%s/%d/%d", cells[k], h.sender, h.slot, h.hash)] = true
				}
				add(subjects[k], bytes.Clone(script[:n]))
				script = script[n:]
			}
			adds++
		}

		for _, c := range []Counters{r.Counters(), rb.Counters()} {
			if sum := c.Used + c.Malformed + c.WrongKind + c.WrongSender + c.Unknown + c.WrongLength + c.Future +
				c.Rejected + c.Late + c.Duplicate; sum != uint64(adds) {
				t.Fatalf("%d chunks added, %d counted: %+v", adds, sum, c)
			}
		}
		for _, m := range bounded {
			if len(m.Payload) != 40 || m.Cell != "c1" || m.Slot > 2 {
				t.Fatalf("bounded reassembler delivered %d bytes of cell %s slot %d", len(m.Payload), m.Cell, m.Slot)
			}
		}
		for key, a := range rb.senders {
			if cap(a.buf) > 40 || cap(a.have) > MaxChunks {
				t.Fatalf("%s holds %d bytes and %d chunk flags", key, cap(a.buf), cap(a.have))
			}
		}
		c := r.Counters()
		if c.Delivered != uint64(len(delivered)) {
			t.Fatalf("%d deliveries counted, %d made", c.Delivered, len(delivered))
		}
		for _, m := range delivered {
			if m.Kind != KindFrame || m.Hash == 9 {
				t.Fatalf("delivered kind %v hash %d", m.Kind, m.Hash)
			}
			if crc32.Checksum(m.Payload, castagnoli) != crc32.Checksum(m.Payload, castagnoli) {
				t.Fatal("unreachable")
			}
			key := fmt.Sprintf("%s.%s/%d/%d", m.Cell, m.Sender, m.Slot, m.Hash)
			if p := byKey[key]; p != nil && !forged[key] && !bytes.Equal(m.Payload, p.payload) {
				t.Fatalf("delivered %x as %s, which published %x", m.Payload, p.key(), p.payload)
			}
		}
	})
}

// dataOffsets are the offsets of a chunk's data bytes.
func dataOffsets(n int) []int {
	var out []int
	for i := HeaderSize; i < n; i++ {
		out = append(out, i)
	}
	return out
}
