package bpf

import "sync/atomic"

// The rules of rrl.h in Go, for the fallback, which charges its replies in
// the same table through the loader's memory mapping.
// controlplane/selection/xdprules runs the C functions under BPF_PROG_RUN,
// and its tests hold these equal to them.

const (
	rrlHashMul   = 0x9E3779B97F4A7C15 // RRL_HASH_MUL
	rrlCountMask = 0xffff             // RRL_COUNT_MASK
	nsecPerSec   = 1_000_000_000
)

// RRLHash is rrl_hash: the hash of the key of a reply of kind resp to the
// client prefix client (the masked address as the program loads it: a
// little-endian word of its first 4 or 8 bytes) under seed. Its top bits
// pick the set, its low 48 are the tag.
func RRLHash(seed, client uint64, v6 bool, resp uint64) uint64 {
	var f uint64
	if v6 {
		f = 1
	}
	h := (seed ^ resp) * rrlHashMul
	h ^= h >> 29
	h = (h ^ client) * rrlHashMul
	h ^= h >> 29
	h = (h ^ f) * rrlHashMul
	return h ^ h>>32
}

// RRLSetIndex is the set of a key hashed h in a table of 2^bits sets.
func RRLSetIndex(h uint64, bits uint32) uint32 { return uint32(h >> (64 - bits)) }

// RRLRule is what rrl_charge reads from the program's load-time
// constants.
type RRLRule struct {
	IntervalNs uint64 // rrl_interval_ns: 1 s / rate
	WindowNs   uint64 // rrl_window_ns
	Slip       uint32 // rrl_slip
}

// Charge is rrl_charge: it charges one reply of the key hashed h to its
// account in set at now (CLOCK_BOOTTIME ns) and returns the verdict. It
// reads and writes the ways' words atomically, one by one and without a
// lock, as the program does: set is shared with it.
func (r RRLRule) Charge(set *SteadydnsRrlSet, h, now uint64) SteadydnsRrlVerdict {
	fp := h << 16
	w := 0
	var tag, old uint64
	least := ^uint64(0)
	found := false
	for i := range set.Way {
		t, a := atomic.LoadUint64(&set.Way[i].Tag), atomic.LoadUint64(&set.Way[i].Tat)
		if (t^fp)&^rrlCountMask == 0 {
			w, tag, old, found = i, t, a, true
			break
		}
		if a < least {
			least, w = a, i
		}
	}
	if !found {
		tag = fp
	}
	tat := max(old, now) + r.IntervalNs
	over := tat-now > nsecPerSec
	if tat-now > r.WindowNs {
		tat = now + r.WindowNs
	}
	v := SteadydnsRrlVerdictRRL_SEND
	if over {
		v = SteadydnsRrlVerdictRRL_DROP
		if r.Slip > 0 {
			n := tag&rrlCountMask + 1
			if n >= uint64(r.Slip) {
				n, v = 0, SteadydnsRrlVerdictRRL_SLIP
			}
			tag = tag&^rrlCountMask | n
		}
	}
	atomic.StoreUint64(&set.Way[w].Tag, tag)
	atomic.StoreUint64(&set.Way[w].Tat, tat)
	return v
}
