package loader

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/healthtable"
)

// HealthCapacity is the number of entries in the health table.
func (o *Objects) HealthCapacity() int { return int(o.Health.MaxEntries()) }

// SizeHealthBits sizes the bitmap's map, m, for a table of n entries, and
// sets the program's mask of its words, mask (health_word_mask): the map's
// one value is the whole bitmap, an array of healthtable.BitsWords(n) words.
func SizeHealthBits(m *ebpf.MapSpec, mask *ebpf.VariableSpec, n int) error {
	arr, ok := m.Value.(*btf.Array)
	if !ok {
		return fmt.Errorf("sizing the health bitmap: its value is %T, want an array of words", m.Value)
	}
	words := healthtable.BitsWords(n)
	sized := *arr
	sized.Nelems = words
	m.Value, m.ValueSize = &sized, 8*words
	if err := mask.Set(words - 1); err != nil {
		return fmt.Errorf("setting the health bitmap's mask: %w", err)
	}
	return nil
}

// PushHealth writes a whole health table through the map's memory mapping,
// in one copy, then the bitmap the program reads (a bit lives in one byte,
// so each entry is seen either old or new), and then its metadata, stamped
// with this host's boot clock. It returns the metadata as written.
func (o *Objects) PushHealth(table []byte, version, configHash, staleAfterNs uint64) (bpf.SteadydnsTableMeta, error) {
	return o.PushHealthAt(table, version, configHash, staleAfterNs, BootNs())
}

// PushHealthAt is PushHealth with the arrival stamp given, on the boot
// clock: a table merged from several sources carries the oldest source's
// arrival, so its age is never younger than its oldest part.
func (o *Objects) PushHealthAt(table []byte, version, configHash, staleAfterNs, arrivedNs uint64) (bpf.SteadydnsTableMeta, error) {
	mem, err := o.Health.Memory()
	if err != nil {
		return bpf.SteadydnsTableMeta{}, fmt.Errorf("mapping the health table: %w", err)
	}
	if len(table) != healthtable.Bytes(o.HealthCapacity()) {
		return bpf.SteadydnsTableMeta{}, fmt.Errorf("writing the health table: %d bytes for %d entries", len(table), o.HealthCapacity())
	}
	if _, err := mem.WriteAt(table, 0); err != nil {
		return bpf.SteadydnsTableMeta{}, fmt.Errorf("writing the health table: %w", err)
	}
	bitsMem, err := o.HealthBits.Memory()
	if err != nil {
		return bpf.SteadydnsTableMeta{}, fmt.Errorf("mapping the health bitmap: %w", err)
	}
	if _, err := bitsMem.WriteAt(healthtable.Bits(table), 0); err != nil {
		return bpf.SteadydnsTableMeta{}, fmt.Errorf("writing the health bitmap: %w", err)
	}
	meta := bpf.SteadydnsTableMeta{Version: version, ConfigHash: configHash, ArrivedNs: arrivedNs, StaleAfterNs: staleAfterNs}
	if err := o.HealthMeta.Put(uint32(0), &meta); err != nil {
		return bpf.SteadydnsTableMeta{}, fmt.Errorf("writing the health table metadata: %w", err)
	}
	if err := o.armStale(); err != nil {
		return bpf.SteadydnsTableMeta{}, err
	}
	return meta, nil
}

// armStale runs arm_stale once: queries read no clock, so the program's
// stale timer marks the table stale when it passes its stale_after.
func (o *Objects) armStale() error {
	// The smallest frame an XDP program may be run on: an Ethernet header.
	ret, err := o.ArmStale.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
	if err != nil {
		return fmt.Errorf("arming the stale timer: %w", err)
	}
	if ret != xdpPass {
		return fmt.Errorf("arming the stale timer: the program returned %d", ret)
	}
	return nil
}

// xdpPass is what arm_stale returns once the timer is armed.
const xdpPass = 2

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
	var e bpf.SteadydnsHealthEntry
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e)), unsafe.Sizeof(e))
	if _, err := mem.ReadAt(b, int64(healthtable.Bytes(int(i)))); err != nil {
		return false
	}
	return e.State == bpf.SteadydnsHealthStateHEALTH_UP
}

// BootNs reads CLOCK_BOOTTIME, the clock bpf_ktime_get_boot_ns reads.
func BootNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return uint64(ts.Nano())
}
