package healthtable_test

import (
	"testing"

	"github.com/steadydns/steadydns/controlplane/healthtable"
)

// TestEntries: entries read back as put, an entry past the table reads as
// down with no reason, and the bitmap has a bit set for each entry up.
func TestEntries(t *testing.T) {
	table := make([]byte, healthtable.Bytes(130))
	healthtable.Put(table, 0, true, 128)
	healthtable.Put(table, 65, true, 3)
	healthtable.Put(table, 129, false, 130)
	for i, want := range map[uint32]struct {
		up     bool
		reason uint8
	}{0: {true, 128}, 1: {false, 0}, 65: {true, 3}, 129: {false, 130}, 130: {false, 0}} {
		if up, r := healthtable.Up(table, i), healthtable.Reason(table, i); up != want.up || r != want.reason {
			t.Errorf("entry %d: up %v reason %d, want %v %d", i, up, r, want.up, want.reason)
		}
	}
	bits := healthtable.Bits(table)
	if len(bits) != 8*4 || healthtable.BitsWords(130) != 4 {
		t.Fatalf("bitmap of %d bytes, %d words for 130 entries; want 32 bytes, 4 words (a power of two)", len(bits), healthtable.BitsWords(130))
	}
	for i := range 130 {
		set := bits[i/8]&(1<<(i%8)) != 0
		if set != (i == 0 || i == 65) {
			t.Errorf("bit %d is %v", i, set)
		}
	}
}
