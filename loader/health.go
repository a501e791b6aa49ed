package loader

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
)

// healthStride is the distance between entries in the mapped table: an
// array map rounds every value up to 8 bytes.
const healthStride = (int(unsafe.Sizeof(bpf.SteadydnsHealthEntry{})) + 7) &^ 7

// HealthCapacity is the number of entries in the health table.
func (o *Objects) HealthCapacity() int { return int(o.Health.MaxEntries()) }

// WriteHealth writes a whole health table through the map's memory
// mapping and then its metadata, stamped with this host's boot clock.
// The state is one byte, so each entry's state is seen either old or new.
func (o *Objects) WriteHealth(table []byte, version, configHash uint64, staleAfterNs uint64) error {
	mem, err := o.Health.Memory()
	if err != nil {
		return fmt.Errorf("mapping the health table: %w", err)
	}
	if len(table) != o.HealthCapacity()*healthStride {
		return fmt.Errorf("writing the health table: %d bytes for %d entries", len(table), o.HealthCapacity())
	}
	if _, err := mem.WriteAt(table, 0); err != nil {
		return fmt.Errorf("writing the health table: %w", err)
	}
	meta := bpf.SteadydnsTableMeta{Version: version, ConfigHash: configHash, ArrivedNs: BootNs(), StaleAfterNs: staleAfterNs}
	if err := o.HealthMeta.Put(uint32(0), &meta); err != nil {
		return fmt.Errorf("writing the health table metadata: %w", err)
	}
	return nil
}

// ReadHealth copies the health table and its metadata out of the maps.
func (o *Objects) ReadHealth(table []byte) (bpf.SteadydnsTableMeta, error) {
	var meta bpf.SteadydnsTableMeta
	mem, err := o.Health.Memory()
	if err != nil {
		return meta, fmt.Errorf("mapping the health table: %w", err)
	}
	if _, err := mem.ReadAt(table, 0); err != nil {
		return meta, fmt.Errorf("reading the health table: %w", err)
	}
	if err := o.HealthMeta.Lookup(uint32(0), &meta); err != nil {
		return meta, fmt.Errorf("reading the health table metadata: %w", err)
	}
	return meta, nil
}

// HealthUpAt reads entry i's state from the mapped table: what XDP reads.
func (o *Objects) HealthUpAt(i uint32) bool {
	mem, err := o.Health.Memory()
	if err != nil || int(i) >= o.HealthCapacity() {
		return false
	}
	var b [1]byte
	if _, err := mem.ReadAt(b[:], int64(i)*int64(healthStride)); err != nil {
		return false
	}
	return b[0] == byte(bpf.SteadydnsHealthStateHEALTH_UP)
}

// HealthUp reports whether entry i of a table read with ReadHealth is up.
func HealthUp(table []byte, i uint32) bool {
	off := int(i) * healthStride
	return off+healthStride <= len(table) && table[off] == byte(bpf.SteadydnsHealthStateHEALTH_UP)
}

// HealthReason reads entry i's reason from a table read with ReadHealth.
func HealthReason(table []byte, i uint32) uint8 {
	off := int(i) * healthStride
	if off+healthStride > len(table) {
		return 0
	}
	return table[off+1]
}

// PutHealthEntry encodes one entry into a table buffer.
func PutHealthEntry(table []byte, i uint32, up bool, reason uint8) {
	off := int(i) * healthStride
	var e uint32
	if up {
		e = uint32(bpf.SteadydnsHealthStateHEALTH_UP)
	}
	e |= uint32(reason) << 8
	binary.LittleEndian.PutUint32(table[off:], e)
}

// HealthTableBytes is the size of a table of n entries.
func HealthTableBytes(n int) int { return n * healthStride }

// BootNs reads CLOCK_BOOTTIME, the clock bpf_ktime_get_boot_ns reads.
func BootNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return uint64(ts.Nano())
}
