// Package healthtable is the health table's byte layout: the entries the
// XDP program reads, as the aggregator encodes them, the edge merges them
// and the loader writes them. The layout comes from bpf/'s generated
// types; this package only wraps it, so a host that aggregates and does
// not serve links no loader.
package healthtable

import (
	"math/bits"
	"unsafe"

	"github.com/steadydns/steadydns/bpf"
)

// Stride is the distance between entries in the mapped table: an array
// map rounds every value up to 8 bytes.
const Stride = (int(unsafe.Sizeof(bpf.SteadydnsHealthEntry{})) + 7) &^ 7

// Bytes is the size of a table of n entries.
func Bytes(n int) int { return n * Stride }

// entry is entry i of a table buffer, typed as the program reads it. An
// index past the buffer panics, as any index does.
func entry(table []byte, i uint32) *bpf.SteadydnsHealthEntry {
	e := table[int(i)*Stride:][:Stride]
	return (*bpf.SteadydnsHealthEntry)(unsafe.Pointer(&e[0]))
}

// Put encodes one entry into a table buffer.
func Put(table []byte, i uint32, up bool, reason uint8) {
	state := bpf.SteadydnsHealthStateHEALTH_DOWN
	if up {
		state = bpf.SteadydnsHealthStateHEALTH_UP
	}
	*entry(table, i) = bpf.SteadydnsHealthEntry{State: state, Reason: reason}
}

// Up reports whether entry i of a table is up; an entry past the table is
// not.
func Up(table []byte, i uint32) bool {
	return (int(i)+1)*Stride <= len(table) && entry(table, i).State == bpf.SteadydnsHealthStateHEALTH_UP
}

// Reason is entry i's reason; 0 past the table.
func Reason(table []byte, i uint32) uint8 {
	if (int(i)+1)*Stride > len(table) {
		return 0
	}
	return entry(table, i).Reason
}

// BitsWords is the size in 64-bit words of the bitmap of a table of n
// entries: a power of two, so that the program masks a word's index
// (health_word_mask) where it would otherwise compare it.
func BitsWords(n int) uint32 {
	return 1 << bits.Len32(max(uint32((n+63)/64), 1)-1)
}

// Bits is the bitmap the program's scan reads (health_bits): bit i, in
// little-endian 64-bit words, set while entry i of table is up.
func Bits(table []byte) []byte {
	n := len(table) / Stride
	b := make([]byte, 8*BitsWords(n))
	for i := range n {
		if entry(table, uint32(i)).State == bpf.SteadydnsHealthStateHEALTH_UP {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}
