package testenv

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The fleet's plan. Every host sits on one subnet, 198.18.64.0/20 and
// fd53:64::/64, apart from the single-edge topology's 198.18.0.0/24 and
// 198.18.1.0/24. The third octet of a host's IPv4 address is its role, and
// the IPv6 address and the MAC repeat it, so any of them reads as a name:
//
//	client              198.18.64.1      fd53:64::64:1     02:53:64:00:00:01
//	edge i      e<i>    198.18.65.<i>    fd53:64::65:<i>   02:53:65:00:00:<i>
//	aggregator i a<i>   198.18.66.<i>    fd53:64::66:<i>   02:53:66:00:00:<i>
//	backend i   b<i>    198.18.67.<i>    fd53:64::67:<i>   02:53:67:00:00:<i>
//	prober j of region r
//	            p<r><j> 198.18.7<r>.<j>  fd53:64::7<r>:<j> 02:53:7<r>:00:00:<j>
//
// Probers are lettered within their region (p1a, p1b, …) and numbered from
// 1 in their addresses. A host's port on the switch has the host's MAC with
// 01 in the fifth byte.
const (
	fleetV4Bits = 20
	fleetV6Bits = 64
)

// Limits on a fleet's size. Names carry one digit for the region and one
// letter for the prober, and two digits for the others, so that link names
// fit in 15 bytes with the longest prefix.
const (
	MaxRegions          = 9
	MaxProbersPerRegion = 26
	MaxPerRole          = 99 // edges, aggregators or backends
)

// Kinds of fleet host, as the first letter of their short names.
const (
	kindClient     = 'c'
	kindEdge       = 'e'
	kindAggregator = 'a'
	kindProber     = 'p'
	kindBackend    = 'b'
)

// member is a fleet host's place in the plan, from which its names, its
// addresses and its MACs all follow. region is set for probers only.
type member struct {
	kind          byte
	region, index int
}

// group is the third octet of the member's IPv4 address.
func (m member) group() int {
	switch m.kind {
	case kindEdge:
		return 65
	case kindAggregator:
		return 66
	case kindBackend:
		return 67
	case kindProber:
		return 70 + m.region
	}
	return 64
}

// short is the member's name inside namespace and link names: c, e1, a1,
// p1a, b1.
func (m member) short() string {
	switch m.kind {
	case kindClient:
		return "c"
	case kindProber:
		return fmt.Sprintf("p%d%c", m.region, 'a'+m.index-1)
	}
	return string(m.kind) + strconv.Itoa(m.index)
}

// role is what users call the host: the short name, but "client" for the
// client.
func (m member) role() string {
	if m.kind == kindClient {
		return "client"
	}
	return m.short()
}

func (m member) v4() netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, byte(m.group()), byte(m.index)})
}

// v6 writes the group and the index in decimal, so fd53:64::65:12 is
// edge 12 as 198.18.65.12 is.
func (m member) v6() netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd53:64::%d:%d", m.group(), m.index))
}

// mac writes the group so that it reads as in decimal: 02:53:65:… for edges.
func (m member) mac() net.HardwareAddr {
	g := m.group()
	return net.HardwareAddr{0x02, 0x53, byte(g/10<<4 | g%10), 0, 0, byte(m.index)}
}

// fleetPortMAC is the MAC of the switch port of the host with MAC hostMAC.
func fleetPortMAC(hostMAC net.HardwareAddr) net.HardwareAddr {
	mac := slices.Clone(hostMAC)
	mac[4] = 1
	return mac
}

var (
	// fleetBridgeMAC is fixed for the reason addBridge gives.
	fleetBridgeMAC = net.HardwareAddr{0x02, 0x53, 0x64, 0, 0, 0xfe}
	// cutMAC belongs to no port. Partition points neighbour entries at it,
	// and the switch, which floods no unknown unicast, drops such frames.
	cutMAC = net.HardwareAddr{0x02, 0x53, 0x64, 0, 0, 0}
)

// Fleet names. Namespaces are "<p>-<short>" and "<p>-sw" for the switch;
// a host's link is "<p><short>", its port on the switch "<p>s<short>", and
// the bridge "<p>sw". The longest suffix is "sp9z" or "se99", four bytes, as
// in the single-edge topology.
func fleetNS(p string, m member) string   { return p + "-" + m.short() }
func fleetLink(p string, m member) string { return p + m.short() }
func fleetPort(p string, m member) string { return p + "s" + m.short() }
func switchNS(p string) string            { return p + "-sw" }
func switchBridge(p string) string        { return p + "sw" }

// parseShort is the inverse of short. It accepts only names short gives
// out: no leading zeros, no index past the limits.
func parseShort(s string) (member, bool) {
	if s == "c" {
		return member{kind: kindClient, index: 1}, true
	}
	if s == "" {
		return member{}, false
	}
	switch k := s[0]; k {
	case kindEdge, kindAggregator, kindBackend:
		i, ok := parseIndex(s[1:], MaxPerRole)
		return member{kind: k, index: i}, ok
	case kindProber:
		if len(s) != 3 || s[1] < '1' || s[1] > '0'+MaxRegions || s[2] < 'a' || s[2] >= 'a'+MaxProbersPerRegion {
			return member{}, false
		}
		return member{kind: kindProber, region: int(s[1] - '0'), index: int(s[2]-'a') + 1}, true
	}
	return member{}, false
}

// parseIndex reads a decimal from 1 to max written as strconv writes it.
func parseIndex(s string, max int) (int, bool) {
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 1 && i <= max && strconv.Itoa(i) == s
}

// regionName is the name of region r (from 1), the one probers are given
// with `serve --region`.
func regionName(r int) string { return "r" + strconv.Itoa(r) }

// ownsFleetNS and ownsFleetLink match the names above for prefix p.
func ownsFleetNS(p, name string) bool {
	rest, ok := strings.CutPrefix(name, p+"-")
	if !ok {
		return false
	}
	_, ok = parseShort(rest)
	return ok || rest == "sw"
}

func ownsFleetLink(p, name string) bool {
	rest, ok := strings.CutPrefix(name, p)
	if !ok {
		return false
	}
	if rest == "sw" {
		return true
	}
	if _, ok := parseShort(rest); ok {
		return true
	}
	rest, ok = strings.CutPrefix(rest, "s")
	if !ok {
		return false
	}
	_, ok = parseShort(rest)
	return ok
}
