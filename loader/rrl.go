package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"

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

// RRLKey is the key of a reply of kind resp to client, as rrl_check in
// bpf/rrl.h builds it: the client's prefix with resp, which RRLAnswer,
// RRLNXDomain and RRLError give.
func (r RRL) RRLKey(client netip.Addr, resp uint64) bpf.SteadydnsRrlKey {
	client = client.Unmap()
	k := bpf.SteadydnsRrlKey{Resp: resp}
	m4, m6 := r.masks()
	if client.Is4() {
		a := client.As4()
		binary.LittleEndian.PutUint32(k.Client[:4], binary.LittleEndian.Uint32(a[:])&m4)
		return k
	}
	a := client.As16()
	binary.LittleEndian.PutUint64(k.Client[:], binary.LittleEndian.Uint64(a[:8])&m6)
	k.V6 = 1
	return k
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

// rrlAccount charges one reply to st at now: rrl_account in bpf/rrl.h.
func (r RRL) rrlAccount(st *bpf.SteadydnsRrlState, now uint64) bpf.SteadydnsRrlVerdict {
	tat := max(st.Tat, now) + r.interval()
	over := tat-now > uint64(time.Second)
	if window := uint64(r.Window); tat-now > window {
		tat = now + window
	}
	st.Tat = tat
	if !over {
		return RRLSend
	}
	st.Limited++
	if r.Slip > 0 && st.Limited%uint32(r.Slip) == 0 {
		return RRLSlip
	}
	return RRLDrop
}

func (r RRL) exempt(client netip.Addr) bool {
	client = client.Unmap()
	for _, p := range r.Exempt {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

// RRLAccount charges a reply of kind resp to client at now (BootNs) in
// the map XDP charges its replies in, and returns the verdict. Like the
// program, it reads and writes the entry without a lock: a reply XDP
// accounts for the same key meanwhile may be lost, which lets one more
// reply through.
func (o *Objects) RRLAccount(client netip.Addr, resp uint64, now uint64) (bpf.SteadydnsRrlVerdict, error) {
	r := o.rrl
	k := r.RRLKey(client, resp)
	var st bpf.SteadydnsRrlState
	if err := o.Rrl.Lookup(&k, &st); errors.Is(err, ebpf.ErrKeyNotExist) {
		st = bpf.SteadydnsRrlState{Tat: now + r.interval()}
		if err := o.Rrl.Update(&k, &st, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return RRLSend, fmt.Errorf("adding a rate-limit entry: %w", err)
		}
		return RRLSend, nil
	} else if err != nil {
		return RRLSend, fmt.Errorf("reading a rate-limit entry: %w", err)
	}
	v := r.rrlAccount(&st, now)
	if err := o.Rrl.Update(&k, &st, ebpf.UpdateAny); err != nil {
		return RRLSend, fmt.Errorf("writing a rate-limit entry: %w", err)
	}
	if v != RRLSend && r.exempt(client) {
		return RRLSend, nil
	}
	return v, nil
}

// RRLOn reports whether the program was loaded with rate limiting on.
func (o *Objects) RRLOn() bool { return o.rrl.Rate > 0 }

// setRRL sets the program's rate-limiting constants.
func setRRL(vars *bpf.SteadydnsVariableSpecs, r RRL) error {
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

// armClock starts the timer that keeps rate limiting's clock in XDP.
func (o *Objects) armClock() error {
	if !o.RRLOn() {
		return nil
	}
	ret, err := o.ArmRrlClock.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
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
