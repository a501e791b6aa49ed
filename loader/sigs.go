package loader

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bpf"
)

// SigBytesMax is the most bytes of RRSIG records a signature entry holds
// (struct sig_value in bpf/sigs.h).
const SigBytesMax = len(bpf.SteadydnsSigValue{}.Rr)

const sigMul = 0x9E3779B97F4A7C15

// AnswerContent is answer_content of bpf/sigs.h: one answer's share of a
// signature's key, from its address as its candidate holds it (an A's in
// the first 4 bytes). A signature's key adds it up over the answers, so
// the program and the control plane name an RRset alike whatever the
// answers' order.
func AnswerContent(qtype uint16, addr [16]byte) uint64 {
	lo := binary.LittleEndian.Uint64(addr[:8])
	hi := binary.LittleEndian.Uint64(addr[8:])
	if qtype == 1 { // A
		lo, hi = lo&0xffffffff, 0
	}
	h := lo * sigMul
	h ^= h >> 29
	h = (h ^ hi) * sigMul
	return h ^ h>>32
}

// SigSum is the sum struct sig_value keeps of its records: the
// ones-complement sum of rr, zero-padded to even, in little-endian 16-bit
// words.
func SigSum(rr []byte) uint32 {
	var sum uint32
	for i := 0; i < len(rr); i += 2 {
		w := uint32(rr[i])
		if i+1 < len(rr) {
			w |= uint32(rr[i+1]) << 8
		}
		sum += w
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum
}

// CurrentSigEpoch is the epoch the program looks signatures up under.
func (o *Objects) CurrentSigEpoch() (uint32, error) {
	var e uint32
	if err := o.SigEpoch.Lookup(uint32(0), &e); err != nil {
		return 0, fmt.Errorf("reading the signatures' epoch: %w", err)
	}
	return e, nil
}

// SetSigEpoch makes the program look signatures up under epoch e.
func (o *Objects) SetSigEpoch(e uint32) error {
	if err := o.SigEpoch.Put(uint32(0), e); err != nil {
		return fmt.Errorf("writing the signatures' epoch: %w", err)
	}
	return nil
}

// PutSig writes the RRSIGs of the answers k names. An entry is written
// once: a change of signatures goes under another epoch.
func (o *Objects) PutSig(k bpf.SteadydnsSigKey, v *bpf.SteadydnsSigValue) error {
	if err := o.Sigs.Put(k, v); err != nil {
		return fmt.Errorf("writing a signature: %w", err)
	}
	return nil
}

// DeleteSig removes an entry; one already gone is not an error.
func (o *Objects) DeleteSig(k bpf.SteadydnsSigKey) error {
	if err := o.Sigs.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("removing a signature: %w", err)
	}
	return nil
}

// SigKeys are the entries in the map, an earlier process's included.
func (o *Objects) SigKeys() ([]bpf.SteadydnsSigKey, error) {
	var out []bpf.SteadydnsSigKey
	var k bpf.SteadydnsSigKey
	var v bpf.SteadydnsSigValue
	it := o.Sigs.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("listing the signatures: %w", err)
	}
	return out, nil
}

// SigCapacity is the most signature entries the map holds.
func (o *Objects) SigCapacity() int { return int(o.Sigs.MaxEntries()) }
