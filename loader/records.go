package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bpf"
)

// MaxCandidates is K, the candidates per record set (MAX_CANDIDATES).
const MaxCandidates = len(bpf.SteadydnsRrset{}.Cand)

// RecordKey identifies a record set in the data plane: the lowercased wire
// name and the query type.
type RecordKey struct {
	Wire  string // lowercased wire-format name, root label included
	Qtype uint16
}

// bucket returns the record map for a wire name of n bytes and the key
// bytes as the kernel hashes them (bucket-sized name, then the qtype in
// host order), matching build_key in bpf/dns.h.
func (o *Objects) bucket(k RecordKey) (*ebpf.Map, []byte, error) {
	n := len(k.Wire)
	var m *ebpf.Map
	var size int
	switch {
	case n == 0 || n > 255:
		return nil, nil, fmt.Errorf("record key: wire name of %d bytes", n)
	case n <= 32:
		m, size = o.Rr32, 32
	case n <= 64:
		m, size = o.Rr64, 64
	case n <= 128:
		m, size = o.Rr128, 128
	default:
		m, size = o.Rr256, 256
	}
	key := make([]byte, size+2)
	copy(key, k.Wire)
	key[size] = byte(k.Qtype)
	key[size+1] = byte(k.Qtype >> 8)
	return m, key, nil
}

// PutRecord inserts or replaces a record set. The maps are not
// preallocated, so the replacement is seen whole or not at all.
func (o *Objects) PutRecord(k RecordKey, v *bpf.SteadydnsRrset) error {
	m, key, err := o.bucket(k)
	if err != nil {
		return err
	}
	if err := m.Put(key, v); err != nil {
		return fmt.Errorf("writing record set %q/%d: %w", k.Wire, k.Qtype, err)
	}
	return nil
}

// DeleteRecord removes a record set; a missing one is not an error.
func (o *Objects) DeleteRecord(k RecordKey) error {
	m, key, err := o.bucket(k)
	if err != nil {
		return err
	}
	if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("deleting record set %q/%d: %w", k.Wire, k.Qtype, err)
	}
	return nil
}

// RecordKeys lists the record sets now in the maps.
func (o *Objects) RecordKeys() ([]RecordKey, error) {
	var keys []RecordKey
	for _, m := range []*ebpf.Map{o.Rr32, o.Rr64, o.Rr128, o.Rr256} {
		size := int(m.KeySize()) - 2
		key := make([]byte, size+2)
		var v bpf.SteadydnsRrset
		it := m.Iterate()
		for it.Next(&key, &v) {
			n := 0
			for n < size && key[n] != 0 {
				n += int(key[n]) + 1
			}
			keys = append(keys, RecordKey{Wire: string(key[:min(n+1, size)]), Qtype: uint16(key[size]) | uint16(key[size+1])<<8})
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("listing record sets: %w", err)
		}
	}
	return keys, nil
}

// SyncRecords makes the maps hold exactly sets: it writes every set, then
// deletes those no longer wanted, so no name goes missing in between.
func (o *Objects) SyncRecords(sets map[RecordKey]*bpf.SteadydnsRrset) error {
	for k, v := range sets {
		if err := o.PutRecord(k, v); err != nil {
			return err
		}
	}
	have, err := o.RecordKeys()
	if err != nil {
		return err
	}
	for _, k := range have {
		if _, ok := sets[k]; !ok {
			if err := o.DeleteRecord(k); err != nil {
				return err
			}
		}
	}
	return nil
}
