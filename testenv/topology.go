package testenv

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Backend i gets 198.18.1.<i>, and the bridge takes .254, so 253 is the most
// that fit in the /24.
const MaxBackends = 253

// Prefix lengths of every subnet in the topology.
const (
	v4Bits = 24
	v6Bits = 64
)

var (
	clientV4 = netip.MustParseAddr("198.18.0.1")
	clientV6 = netip.MustParseAddr("fd53::1")
	edgeV4   = netip.MustParseAddr("198.18.0.2")
	edgeV6   = netip.MustParseAddr("fd53::2")
	bridgeV4 = netip.MustParseAddr("198.18.1.254")
	bridgeV6 = netip.MustParseAddr("fd53:1::fe")
)

func backendV4(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 1, byte(i)}) }

// backendV6 writes i in decimal into the last group (fd53:1::10 for backend
// 10) so the two addresses of a backend read alike.
func backendV6(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fd53:1::%d", i)) }

// MAC addresses are fixed (locally administered, 02:53:…) so neighbour entries
// can be written up front and load generators can be told the target MAC.
var (
	clientMAC = mac(0, 1)
	edgeMAC   = mac(0, 2)
	bridgeMAC = mac(1, 0xfe)
)

func backendMAC(i int) net.HardwareAddr { return mac(1, byte(i)) }
func portMAC(i int) net.HardwareAddr    { return mac(2, byte(i)) }

func mac(subnet, host byte) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x53, subnet, 0, 0, host}
}

// Names. Namespaces are "<p>-client", "<p>-edge" and "<p>-b<i>"; links are
// "<p>c0", "<p>e0", "<p>br", "<p>b<i>" and "<p>p<i>". The longest link suffix
// is "b253", and link names stop at 15 bytes, hence the prefix limit.
const maxPrefix = 15 - 4

func clientNS(p string) string           { return p + "-client" }
func edgeNS(p string) string             { return p + "-edge" }
func backendNS(p string, i int) string   { return p + "-b" + strconv.Itoa(i) }
func clientLink(p string) string         { return p + "c0" }
func edgeLink(p string) string           { return p + "e0" }
func bridgeLink(p string) string         { return p + "br" }
func backendLink(p string, i int) string { return p + "b" + strconv.Itoa(i) }
func portLink(p string, i int) string    { return p + "p" + strconv.Itoa(i) }

// checkPrefix keeps prefixes short enough for link names and free of
// characters that mean something in paths or to ip(8).
func checkPrefix(p string) error {
	if p == "" || len(p) > maxPrefix {
		return fmt.Errorf("prefix %q: want 1 to %d characters", p, maxPrefix)
	}
	for _, c := range p {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("prefix %q: only letters, digits, '-' and '_' are allowed", p)
		}
	}
	return nil
}

// ownsNS and ownsLink match the exact names this package gives out, in
// either topology, not everything that starts with the prefix, so Down("sd")
// leaves "sd2-edge" and the host's own interfaces alone.
func ownsNS(p, name string) bool {
	if name == clientNS(p) || name == edgeNS(p) || ownsFleetNS(p, name) {
		return true
	}
	rest, ok := strings.CutPrefix(name, p+"-b")
	return ok && isIndex(rest)
}

func ownsLink(p, name string) bool {
	rest, ok := strings.CutPrefix(name, p)
	if !ok || rest == "" {
		return false
	}
	switch rest {
	case "c0", "e0", "br":
		return true
	}
	return (rest[0] == 'b' || rest[0] == 'p') && isIndex(rest[1:]) || ownsFleetLink(p, name)
}

func isIndex(s string) bool {
	i, err := strconv.Atoi(s)
	return err == nil && i >= 1 && i <= MaxBackends && strconv.Itoa(i) == s
}
