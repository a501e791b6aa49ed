package loader

// The loader's sizing and hashing rules, without root: the tests beside
// them that load the program need it.

import "testing"

// TestNameHash pins name_hash to values worked out apart from Go, for
// wire names shorter than, exactly and longer than one 8-byte word. The
// bpf tests hold the program's hash to the same rule as root.
func TestNameHash(t *testing.T) {
	for _, c := range []struct {
		wire  string
		qtype uint16
		want  uint64
	}{
		{"", 0, 0},
		{"\x00", 1, 0x76def80ba1af6340},
		{"\x06abcdef\x00", 1, 0x31e7ab19dc76a234},
		{"\x07abcdefg\x00", 1, 0x3e52994f0979277b},
		{"\x07example\x04test\x00", 1, 0x840e5fb4e37d29ca},
		{"\x07example\x04test\x00", 28, 0x7e9b5beba614ffdc},
		{"\x03www\x07example\x04test\x00", 1, 0x41938761ea4dbb14},
	} {
		if got := NameHash(c.wire, c.qtype); got != c.want {
			t.Errorf("NameHash(%q, %d) = %#x, want %#x", c.wire, c.qtype, got, c.want)
		}
	}
}

// TestTableSlots: twice the capacity, rounded up to a power of two, so
// that at most half the slots are in use.
func TestTableSlots(t *testing.T) {
	for _, c := range []struct{ capacity, want uint32 }{
		{0, 2}, {1, 2}, {2, 4}, {3, 8}, {4, 8}, {5, 16}, {1 << 16, 1 << 17}, {1<<16 + 1, 1 << 18},
	} {
		if got := TableSlots(c.capacity); got != c.want {
			t.Errorf("TableSlots(%d) = %d, want %d", c.capacity, got, c.want)
		}
	}
}

// TestLiveBits: the live region keeps its sets at a load of at most a
// half, is never under 1,024 slots nor over the table.
func TestLiveBits(t *testing.T) {
	for _, c := range []struct {
		n             int
		maxBits, want uint32
	}{
		{0, 17, minLiveBits},
		{512, 17, 10},
		{513, 17, 11},
		{1 << 16, 17, 17},
		{1 << 20, 17, 17},
		{0, 8, 8},
	} {
		if got := liveBits(c.n, c.maxBits); got != c.want {
			t.Errorf("liveBits(%d, %d) = %d, want %d", c.n, c.maxBits, got, c.want)
		}
	}
}

// TestRRLTableSets: sets of RRL_WAYS accounts, enough for size, a power
// of two; 0 is the default size.
func TestRRLTableSets(t *testing.T) {
	for _, c := range []struct {
		size int
		want uint32
	}{
		{0, uint32(RRLTableDefault / rrlWays)},
		{1, 1}, {4, 1}, {5, 2},
		{1024, 256}, {1025, 512},
	} {
		if got := RRLTableSets(c.size); got != c.want {
			t.Errorf("RRLTableSets(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}
