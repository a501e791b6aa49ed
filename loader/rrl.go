package loader

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
)

// RRL is response rate limiting as the data plane applies it, on both
// paths: bpf/rrl.h in XDP, RRLAccount for the fallback. A zero Rate turns
// it off.
type RRL struct {
	Rate       int           // replies per second per key
	Slip       int           // every Slip-th reply over the limit goes out truncated; 0 drops them all
	Window     time.Duration // at least a second: how long a flood stays limited after it stops
	IPv4Prefix int           // 0..32
	IPv6Prefix int           // 0..RRLMaxIPv6Prefix
	Exempt     []netip.Prefix
	// TableSize is how many accounts the table holds, RRLTableMin to
	// RRLTableMax, rounded up to a power of two; 0 is
	// RRLTableDefault. The table is sized so even with rate limiting
	// off, so that turning it on keeps the pinned maps' layout.
	TableSize int
}

// The rate-limit table's accounts: by default, at least and at most.
const (
	RRLTableDefault = int(bpf.SteadydnsLimitsRRL_TABLE_DEFAULT)
	RRLTableMin     = int(bpf.SteadydnsLimitsRRL_TABLE_MIN)
	RRLTableMax     = int(bpf.SteadydnsLimitsRRL_TABLE_MAX)
	rrlWays         = int(bpf.SteadydnsLimitsRRL_WAYS)
	rrlSetSize      = int(unsafe.Sizeof(bpf.SteadydnsRrlSet{}))
)

// RRLTableSets is the number of sets of the table of size accounts (0:
// the default): a power of two.
func RRLTableSets(size int) uint32 {
	if size == 0 {
		size = RRLTableDefault
	}
	return 1 << bits.Len32(uint32((size+rrlWays-1)/rrlWays)-1)
}

// RRLMaxIPv6Prefix is the longest IPv6 client prefix a key holds.
const RRLMaxIPv6Prefix = int(bpf.SteadydnsLimitsRRL_V6PREFIX_MAX)

// RRL verdicts: send the reply, send it truncated (TC=1, no records), or
// send nothing.
const (
	RRLSend = bpf.SteadydnsRrlVerdictRRL_SEND
	RRLSlip = bpf.SteadydnsRrlVerdictRRL_SLIP
	RRLDrop = bpf.SteadydnsRrlVerdictRRL_DROP
)

func (r RRL) interval() uint64 { return uint64(time.Second) / uint64(r.Rate) }

// masks are the client prefix masks as the program holds them: network
// order in memory, read as little-endian words.
func (r RRL) masks() (uint32, uint64) {
	m4 := netip.PrefixFrom(netip.IPv4Unspecified(), r.IPv4Prefix)
	m6 := netip.PrefixFrom(netip.IPv6Unspecified(), r.IPv6Prefix)
	var b4 [4]byte
	var b6 [8]byte
	for i := range 32 {
		if i < m4.Bits() {
			b4[i/8] |= 0x80 >> (i % 8)
		}
	}
	for i := range 64 {
		if i < m6.Bits() {
			b6[i/8] |= 0x80 >> (i % 8)
		}
	}
	return binary.LittleEndian.Uint32(b4[:]), binary.LittleEndian.Uint64(b6[:])
}

// client is the client's prefix as rrl_check in bpf/rrl.h loads it: the
// masked address's first 4 (IPv4) or 8 bytes as a little-endian word, and
// the family.
func (r RRL) client(client netip.Addr) (uint64, bool) {
	client = client.Unmap()
	m4, m6 := r.masks()
	if client.Is4() {
		a := client.As4()
		return uint64(binary.LittleEndian.Uint32(a[:]) & m4), false
	}
	a := client.As16()
	return binary.LittleEndian.Uint64(a[:8]) & m6, true
}

// RRLAnswer is the kind of an answer or NODATA: its name and type, as
// NameHash of the lowercased wire name, which XDP has from the record
// table's lookup.
func RRLAnswer(wire string, qtype uint16) uint64 { return NameHash(wire, qtype) }

// RRLNXDomain is the kind of an NXDOMAIN: the zone's name (lowercased
// wire form), so a flood of random names in one zone is one key.
func RRLNXDomain(zoneWire string) uint64 { return NameHash(zoneWire, 0) }

// RRLError is the kind of any other error reply: its rcode.
func RRLError(rcode int) uint64 { return uint64(rcode) }

func (r RRL) exempt(client netip.Addr) bool {
	client = client.Unmap()
	for _, p := range r.Exempt {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

// rrlTable is the rate-limit table as the loader maps it: the accounts
// XDP charges its replies to, and the key of their hashes.
type rrlTable struct {
	mem  []byte
	bits uint32 // log2 of the sets
	seed uint64
	rule bpf.RRLRule
}

// set is set i, in the mapping.
func (t *rrlTable) set(i uint32) *bpf.SteadydnsRrlSet {
	return (*bpf.SteadydnsRrlSet)(unsafe.Pointer(&t.mem[int(i)*rrlSetSize]))
}

// openRRL maps the table, and draws the key of its hashes unless the
// pinned clock already holds one: the accounts a restart finds are then
// still found. It runs before the clock's timer is armed, since a write
// of the clock's value from here would cancel the timer.
func (o *Objects) openRRL(sets uint32) error {
	var zero uint32
	var c bpf.SteadydnsRrlClock
	if err := o.RrlClock.Lookup(&zero, &c); err != nil {
		return fmt.Errorf("reading the rrl clock: %w", err)
	}
	for c.Seed == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("drawing the rrl hash key: %w", err)
		}
		c.Seed = binary.LittleEndian.Uint64(b[:])
		if c.Seed == 0 {
			continue
		}
		if err := o.RrlClock.Update(&zero, &c, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("writing the rrl hash key: %w", err)
		}
	}
	mem, err := unix.Mmap(o.Rrl.FD(), 0, int(sets)*rrlSetSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mapping the rrl table: %w", err)
	}
	o.rrlTable = &rrlTable{mem: mem, bits: uint32(bits.Len32(sets - 1)), seed: c.Seed, rule: o.rrl.rule()}
	return nil
}

func (t *rrlTable) close() error {
	if t == nil || t.mem == nil {
		return nil
	}
	err := unix.Munmap(t.mem)
	t.mem = nil
	return err
}

// rule is the program's load-time constants that rrl_charge reads.
func (r RRL) rule() bpf.RRLRule {
	if r.Rate <= 0 {
		return bpf.RRLRule{}
	}
	return bpf.RRLRule{IntervalNs: r.interval(), WindowNs: uint64(r.Window), Slip: uint32(r.Slip)}
}

// way finds the account of a reply of kind resp to client: its set and
// hash.
func (o *Objects) way(client netip.Addr, resp uint64) (*bpf.SteadydnsRrlSet, uint64) {
	t := o.rrlTable
	c, v6 := o.rrl.client(client)
	h := bpf.RRLHash(t.seed, c, v6, resp)
	return t.set(bpf.RRLSetIndex(h, t.bits)), h
}

// RRLAccount charges a reply of kind resp to client at now (BootNs) in
// the table XDP charges its replies in, and returns the verdict: rrl_check
// in bpf/rrl.h, through bpf.RRLCharge. Like the program, it reads and
// writes the account without a lock: a reply XDP charges to the same set
// meanwhile may be lost, which lets one more reply through. The table is
// mapped memory: no system call, and nothing that can fail.
func (o *Objects) RRLAccount(client netip.Addr, resp uint64, now uint64) bpf.SteadydnsRrlVerdict {
	set, h := o.way(client, resp)
	v := o.rrlTable.rule.Charge(set, h, now)
	if v != RRLSend && o.rrl.exempt(client) {
		return RRLSend
	}
	return v
}

// RRLTat is the account of a reply of kind resp to client: its
// theoretical arrival time (struct rrl_way), and whether the table holds
// an account of that key.
func (o *Objects) RRLTat(client netip.Addr, resp uint64) (uint64, bool) {
	set, h := o.way(client, resp)
	for i := range set.Way {
		if (atomic.LoadUint64(&set.Way[i].Tag)^h<<16)>>16 == 0 {
			return atomic.LoadUint64(&set.Way[i].Tat), true
		}
	}
	return 0, false
}

// RRLAccounts counts the accounts in the table: its ways not empty.
func (o *Objects) RRLAccounts() int {
	t := o.rrlTable
	n := 0
	for i := range uint32(1) << t.bits {
		s := t.set(i)
		for j := range s.Way {
			if atomic.LoadUint64(&s.Way[j].Tag) != 0 || atomic.LoadUint64(&s.Way[j].Tat) != 0 {
				n++
			}
		}
	}
	return n
}

// ClearRRL empties the table: every key starts from no account.
func (o *Objects) ClearRRL() { clear(o.rrlTable.mem) }

// RRLOn reports whether the program was loaded with rate limiting on.
func (o *Objects) RRLOn() bool { return o.rrl.Rate > 0 }

// setRRL sizes the table and sets the program's rate-limiting constants.
func setRRL(specs *bpf.SteadydnsSpecs, r RRL) error {
	if r.TableSize != 0 && (r.TableSize < RRLTableMin || r.TableSize > RRLTableMax) {
		return fmt.Errorf("setting rrl: table size %d, want %d..%d", r.TableSize, RRLTableMin, RRLTableMax)
	}
	sets := RRLTableSets(r.TableSize)
	specs.Rrl.MaxEntries = sets
	vars := &specs.SteadydnsVariableSpecs
	if err := vars.RrlSetBits.Set(uint32(bits.Len32(sets - 1))); err != nil {
		return fmt.Errorf("setting rrl_set_bits: %w", err)
	}
	if r.Rate <= 0 {
		return nil
	}
	if r.Window < time.Second {
		return fmt.Errorf("setting rrl: window %v is under a second", r.Window)
	}
	if r.IPv4Prefix < 0 || r.IPv4Prefix > 32 || r.IPv6Prefix < 0 || r.IPv6Prefix > RRLMaxIPv6Prefix {
		return fmt.Errorf("setting rrl: prefixes /%d and /%d, want 0..32 and 0..%d", r.IPv4Prefix, r.IPv6Prefix, RRLMaxIPv6Prefix)
	}
	m4, m6 := r.masks()
	for _, s := range []struct {
		v    *ebpf.VariableSpec
		data any
	}{{vars.RrlOn, uint32(1)}, {vars.RrlIntervalNs, r.interval()}, {vars.RrlWindowNs, uint64(r.Window)},
		{vars.RrlSlip, uint32(r.Slip)}, {vars.RrlMask4, m4}, {vars.RrlMask6, m6}} {
		if err := s.v.Set(s.data); err != nil {
			return fmt.Errorf("setting %s: %w", s.v.Name, err)
		}
	}
	return nil
}

// armClock starts the timer that keeps rate limiting's clock in XDP by
// running arm, a load's arm_rrl_clock.
func armClock(arm *ebpf.Program) error {
	ret, err := arm.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
	if err != nil {
		return fmt.Errorf("starting the rrl clock: %w", err)
	}
	if ret != xdpPass {
		return fmt.Errorf("starting the rrl clock: the program returned %d", ret)
	}
	return nil
}

// syncExempt makes the exempt trie hold exactly r.Exempt, IPv4 prefixes
// IPv4-mapped.
func (o *Objects) syncExempt() error {
	want := map[bpf.SteadydnsGeoKey6]uint8{}
	for _, p := range o.rrl.Exempt {
		p = p.Masked()
		k := bpf.SteadydnsGeoKey6{Prefixlen: uint32(p.Bits())}
		if p.Addr().Is4() {
			k.Prefixlen += 96
		}
		k.Addr = netip.AddrFrom16(p.Addr().As16()).As16()
		want[k] = 1
	}
	for k, v := range want {
		if err := o.RrlExempt.Put(&k, &v); err != nil {
			return fmt.Errorf("writing the rrl exempt prefixes: %w", err)
		}
	}
	var stale []bpf.SteadydnsGeoKey6
	var k bpf.SteadydnsGeoKey6
	var v uint8
	it := o.RrlExempt.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the rrl exempt prefixes: %w", err)
	}
	for _, k := range stale {
		if err := o.RrlExempt.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing an rrl exempt prefix: %w", err)
		}
	}
	return nil
}

// RRLVerdict is what becomes of a reply: RRLSend, RRLSlip or RRLDrop.
type RRLVerdict = bpf.SteadydnsRrlVerdict
