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

// Name sizes of the record maps' keys, smallest first. They come from the
// generated key types, which build_key in bpf/dns.h buckets by too.
const (
	class32  = len(bpf.SteadydnsNameKey32{}.Name)
	class64  = len(bpf.SteadydnsNameKey64{}.Name)
	class128 = len(bpf.SteadydnsNameKey128{}.Name)
	class256 = len(bpf.SteadydnsNameKey256{}.Name)
)

// RecordClass returns the name size of the record map that holds a wire
// name of n bytes: 32, 64, 128 or 256, or 0 when no map can hold it. Each
// map holds Options.RecordCapacity sets of its class.
func RecordClass(n int) int {
	switch {
	case n == 0 || n > int(bpf.SteadydnsLimitsNAME_MAX_WIRE):
		return 0
	case n <= class32:
		return class32
	case n <= class64:
		return class64
	case n <= class128:
		return class128
	case n <= class256:
		return class256
	}
	return 0
}

// bucket returns the record map for a wire name and its key, as the
// kernel hashes it: the name zero-filled to the class size, then the
// qtype in host order.
func (o *Objects) bucket(k RecordKey) (*ebpf.Map, any, error) {
	switch RecordClass(len(k.Wire)) {
	case class32:
		key := bpf.SteadydnsNameKey32{Qtype: k.Qtype}
		copy(key.Name[:], k.Wire)
		return o.Rr32, &key, nil
	case class64:
		key := bpf.SteadydnsNameKey64{Qtype: k.Qtype}
		copy(key.Name[:], k.Wire)
		return o.Rr64, &key, nil
	case class128:
		key := bpf.SteadydnsNameKey128{Qtype: k.Qtype}
		copy(key.Name[:], k.Wire)
		return o.Rr128, &key, nil
	case class256:
		key := bpf.SteadydnsNameKey256{Qtype: k.Qtype}
		copy(key.Name[:], k.Wire)
		return o.Rr256, &key, nil
	}
	return nil, nil, fmt.Errorf("record key: wire name of %d bytes", len(k.Wire))
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
	var err error
	if keys, err = appendKeys(keys, o.Rr32, func(k *bpf.SteadydnsNameKey32) ([]byte, uint16) { return k.Name[:], k.Qtype }); err != nil {
		return nil, err
	}
	if keys, err = appendKeys(keys, o.Rr64, func(k *bpf.SteadydnsNameKey64) ([]byte, uint16) { return k.Name[:], k.Qtype }); err != nil {
		return nil, err
	}
	if keys, err = appendKeys(keys, o.Rr128, func(k *bpf.SteadydnsNameKey128) ([]byte, uint16) { return k.Name[:], k.Qtype }); err != nil {
		return nil, err
	}
	return appendKeys(keys, o.Rr256, func(k *bpf.SteadydnsNameKey256) ([]byte, uint16) { return k.Name[:], k.Qtype })
}

// appendKeys appends the keys of one record map; fields takes a key of
// the map's type apart.
func appendKeys[K any](keys []RecordKey, m *ebpf.Map, fields func(*K) ([]byte, uint16)) ([]RecordKey, error) {
	var key K
	var v bpf.SteadydnsRrset
	it := m.Iterate()
	for it.Next(&key, &v) {
		name, qtype := fields(&key)
		// The name ends at its root label; the zeros after it fill the
		// class size.
		n := 0
		for n < len(name) && name[n] != 0 {
			n += int(name[n]) + 1
		}
		keys = append(keys, RecordKey{Wire: string(name[:min(n+1, len(name))]), Qtype: qtype})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("listing record sets: %w", err)
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
