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

// RecordClass returns the name size of the record map that holds a wire
// name of n bytes: 32, 64, 128 or 256, or 0 when no map can hold it. Each
// map holds Options.RecordCapacity sets of its class.
func RecordClass(n int) int {
	switch {
	case n == 0 || n > 255:
		return 0
	case n <= 32:
		return 32
	case n <= 64:
		return 64
	case n <= 128:
		return 128
	}
	return 256
}

// bucket returns the record map for a wire name and the key bytes as the
// kernel hashes them (class-sized name, then the qtype in host order),
// matching build_key in bpf/dns.h.
func (o *Objects) bucket(k RecordKey) (*ebpf.Map, []byte, error) {
	size := RecordClass(len(k.Wire))
	var m *ebpf.Map
	switch size {
	case 32:
		m = o.Rr32
	case 64:
		m = o.Rr64
	case 128:
		m = o.Rr128
	case 256:
		m = o.Rr256
	default:
		return nil, nil, fmt.Errorf("record key: wire name of %d bytes", len(k.Wire))
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

// SyncRecords makes the maps hold exactly sets. It deletes the sets no
// longer wanted before it writes, so that a map never holds more than the
// larger of the old and the new count of its class: new sets fit whenever
// they fit on their own. A kept set is replaced in place and never
// missing; a removed one only leaves a moment early, and XDP passes its
// queries to the fallback.
func (o *Objects) SyncRecords(sets map[RecordKey]*bpf.SteadydnsRrset) error {
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
	for k, v := range sets {
		if err := o.PutRecord(k, v); err != nil {
			return err
		}
	}
	return nil
}
