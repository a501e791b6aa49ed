package loader

// The loader's sizing and hashing rules, without root: the tests beside
// them that load the program need it.

import (
	"strings"
	"testing"

	"github.com/steadydns/steadydns/bpf"
)

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

// TestTableSlots: enough slots that capacity sets fill at most 80% of
// them, and never fewer than the smallest live region.
func TestTableSlots(t *testing.T) {
	for _, c := range []struct{ capacity, want uint32 }{
		{0, 1024}, {1, 1024}, {819, 1024}, {820, 1025}, {1 << 16, 81920}, {1_000_000, 1_250_000},
	} {
		if got := TableSlots(c.capacity); got != c.want {
			t.Errorf("TableSlots(%d) = %d, want %d", c.capacity, got, c.want)
		}
	}
}

// TestLiveSize: a region for n sets holds them at 70%, is never under
// 1,024 slots nor over the table; one suits its sets while they fill at
// most 80% of it and, past the smallest, at least a third.
func TestLiveSize(t *testing.T) {
	for _, c := range []struct {
		n         int
		max, want uint32
	}{
		{0, 81920, 1024}, {716, 81920, 1024}, {717, 81920, 1025}, {7000, 81920, 10000}, {1 << 20, 81920, 81920}, {0, 512, 512},
	} {
		if got := liveSize(c.n, c.max); got != c.want {
			t.Errorf("liveSize(%d, %d) = %d, want %d", c.n, c.max, got, c.want)
		}
	}
	for _, c := range []struct {
		size uint32
		n    int
		want bool
	}{
		{1024, 0, true}, {1024, 819, true}, {1024, 820, false}, {3000, 2400, true}, {3000, 2401, false},
		{3000, 1000, true}, {3000, 999, false}, {81920, 81920, true},
	} {
		if got := liveFits(c.size, c.n, 81920); got != c.want {
			t.Errorf("liveFits(%d, %d) = %v, want %v", c.size, c.n, got, c.want)
		}
	}
}

// TestHomeSlot: the hash's top 32 bits scaled to the region, so every
// slot of a region of any size is some hash's home.
func TestHomeSlot(t *testing.T) {
	for _, c := range []struct {
		h    uint64
		size uint32
		want uint32
	}{
		{0, 1000, 0}, {^uint64(0), 1000, 999}, {1 << 63, 1000, 500}, {1 << 63, 1001, 500}, {0xffffffff, 1000, 0},
	} {
		if got := homeSlot(c.h, c.size); got != c.want {
			t.Errorf("homeSlot(%#x, %d) = %d, want %d", c.h, c.size, got, c.want)
		}
	}
}

// TestNeedsExt: a slot holds a name of up to 48 bytes with one candidate,
// or a static set of up to eight A or two AAAA; anything else has an ext
// entry.
func TestNeedsExt(t *testing.T) {
	short, long := "\x01n\x00", "\x30"+strings.Repeat("a", 48)+"\x00"
	static := uint8(bpf.SteadydnsRrsetFlagsRR_STATIC)
	for _, c := range []struct {
		wire  string
		qtype uint16
		n     uint8
		flags uint8
		pool  bool
		want  bool
	}{
		{short, 1, 1, 0, false, false},
		{short, 1, 2, 0, false, true},
		{short, 1, 8, static, false, false},
		{short, 28, 2, static, false, false},
		{short, 28, 3, static, false, true},
		{short, 1, 9, 0, true, true},
		{long, 1, 1, 0, false, true},
		{long[:48], 1, 1, 0, false, false},
	} {
		v := &bpf.Set{SteadydnsRrset: bpf.SteadydnsRrset{N: c.n, Flags: c.flags}}
		if c.pool {
			v.Pool = make([]bpf.SteadydnsCandidate, c.n)
		}
		if got := NeedsExt(RecordKey{Wire: c.wire, Qtype: c.qtype}, v); got != c.want {
			t.Errorf("NeedsExt(%d-byte name, type %d, n %d, flags %#x, pool %v) = %v, want %v", len(c.wire), c.qtype, c.n, c.flags, c.pool, got, c.want)
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
