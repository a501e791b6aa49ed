package loader

import (
	"unsafe"

	"github.com/steadydns/steadydns/bpf"
)

// The ext map's shape, from bpf/types.h.
const (
	extSize  = int(unsafe.Sizeof(bpf.SteadydnsRecExt{}))
	nameHead = int(bpf.SteadydnsLimitsNAME_HEAD)
)

// DefaultExtCapacity is the ext entries the ext map holds when
// Options.ExtCapacity is 0.
const DefaultExtCapacity = 16

// ExtsFor is the ext map's size for n sets that need an entry, as
// PoolsFor sizes the pool map: twice as many, a power of two, at least
// DefaultExtCapacity.
func ExtsFor(n int) uint32 { return max(DefaultExtCapacity, PoolsFor(n)) }

// ExtBytes is the memory the kernel reserves for an ext map of capacity
// entries, used or not.
func ExtBytes(capacity uint32) uint64 { return uint64(capacity) * uint64(extSize) }

// NeedsExt reports whether a set of qtype named wire needs an ext entry
// (struct rec_ext): its slot keeps a name of up to NAME_HEAD bytes and one
// candidate, or the packed addresses of a static set of up to eight A or
// two AAAA (struct rrset_head).
func NeedsExt(k RecordKey, v *bpf.Set) bool {
	if len(k.Wire) > nameHead || v.Pool != nil {
		return true
	}
	if v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_STATIC) == 0 {
		return v.N > 1
	}
	stride := staticStride(k.Qtype)
	return int(v.N)*stride > 2*int(bpf.SteadydnsLimitsSTATIC_STRIDE_AAAA)
}

// staticStride is a static set's bytes per packed address for qtype.
func staticStride(qtype uint16) int {
	if qtype == 1 { // A
		return int(bpf.SteadydnsLimitsSTATIC_STRIDE_A)
	}
	return int(bpf.SteadydnsLimitsSTATIC_STRIDE_AAAA)
}

// ExtCapacity is the number of ext entries the ext map holds.
func (o *Objects) ExtCapacity() int { return o.records.exts.capacity() }
