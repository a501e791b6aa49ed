package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// nsSysctls make IPv6 usable at once: no duplicate address detection (a
// tentative address cannot be bound or used as a source), and addresses that
// survive the link going down (SetLink would otherwise lose them). "default"
// covers links created later; "all" overrides per-link values.
var nsSysctls = []string{
	"net/ipv6/conf/all/accept_dad", "0",
	"net/ipv6/conf/default/accept_dad", "0",
	"net/ipv6/conf/all/keep_addr_on_down", "1",
	"net/ipv6/conf/default/keep_addr_on_down", "1",
}

// setSysctls must run inside the namespace: /proc/sys/net shows the
// namespace of the thread that opens it.
func setSysctls() error {
	for i := 0; i < len(nsSysctls); i += 2 {
		if err := os.WriteFile("/proc/sys/"+nsSysctls[i], []byte(nsSysctls[i+1]), 0); err != nil {
			return fmt.Errorf("setting %s: %w", nsSysctls[i], err)
		}
	}
	return nil
}

// upTimeout bounds waiting for carrier. The kernel batches carrier changes
// for up to a second, so links usually need about that long.
const upTimeout = 5 * time.Second

// addVeth creates a veth pair from h, with the peer placed straight into
// peer's namespace, so no link ever appears in the root namespace.
func addVeth(h *Host, name string, mac net.HardwareAddr, peer *Host, peerName string, peerMAC net.HardwareAddr) error {
	v := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: name, HardwareAddr: mac},
		PeerName:         peerName,
		PeerHardwareAddr: peerMAC,
		PeerNamespace:    netlink.NsFd(peer.ns),
	}
	if err := h.nl.LinkAdd(v); err != nil {
		return fmt.Errorf("creating veth %s: %w", name, err)
	}
	return nil
}

// addBridge creates a bridge: the edge's backend bridge, or the fleet's
// switch. A fixed MAC stops it from taking a port's MAC (which would change
// as ports come and go and break the backends' neighbour entries); without
// multicast snooping it floods NDP without waiting for a querier.
func addBridge(h *Host, name string, mac net.HardwareAddr) error {
	off := false
	br := &netlink.Bridge{
		LinkAttrs:         netlink.LinkAttrs{Name: name, HardwareAddr: mac},
		MulticastSnooping: &off,
	}
	if err := h.nl.LinkAdd(br); err != nil {
		return fmt.Errorf("creating bridge %s: %w", name, err)
	}
	return nil
}

func enslave(h *Host, port, bridge string) error {
	p, err := h.nl.LinkByName(port)
	if err != nil {
		return fmt.Errorf("finding %s: %w", port, err)
	}
	br, err := h.nl.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("finding %s: %w", bridge, err)
	}
	if err := h.nl.LinkSetMaster(p, br); err != nil {
		return fmt.Errorf("adding %s to %s: %w", port, bridge, err)
	}
	return nil
}

// addPort enslaves a host's veth end to the fleet's switch and pins the
// host's MAC to it with a static FDB entry. The switch then knows every host
// from the start and floods no unknown unicast: frames addressed to cutMAC,
// which no port has, are dropped there and reach no host, not even an XDP
// program that would look at frames meant for others.
func addPort(sw *Host, port, bridge string, hostMAC net.HardwareAddr) error {
	if err := enslave(sw, port, bridge); err != nil {
		return err
	}
	l, err := sw.nl.LinkByName(port)
	if err != nil {
		return fmt.Errorf("finding %s: %w", port, err)
	}
	if err := sw.nl.LinkSetFlood(l, false); err != nil {
		return fmt.Errorf("turning unicast flooding off on %s: %w", port, err)
	}
	err = sw.nl.NeighAdd(&netlink.Neigh{
		LinkIndex:    l.Attrs().Index,
		Family:       unix.AF_BRIDGE,
		Flags:        netlink.NTF_MASTER,
		State:        netlink.NUD_NOARP, // static: neither local to the bridge nor aged out
		HardwareAddr: hostMAC,
	})
	if err != nil {
		return fmt.Errorf("adding %s to the switch's FDB on %s: %w", hostMAC, port, err)
	}
	return configure(sw, port)
}

// configure sets a link up and gives it addresses. IFA_F_NODAD backs up the
// accept_dad sysctl for the addresses that matter.
func configure(h *Host, name string, addrs ...netip.Prefix) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s in %s: %w", name, h.Name, err)
	}
	if err := h.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	for _, p := range addrs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.nl.AddrAdd(l, a); err != nil {
			return fmt.Errorf("adding %s to %s: %w", p, name, err)
		}
	}
	return nil
}

// setNeighbours writes h's permanent neighbour entries (again).
func (h *Host) setNeighbours() error { return h.writeNeighbours(h.neigh) }

// writeNeighbours adds or replaces permanent neighbour entries in h. A fleet
// host has one per other host and family, so each link is looked up once.
func (h *Host) writeNeighbours(entries []neighbour) error {
	links := map[string]netlink.Link{}
	for _, n := range entries {
		l, ok := links[n.link]
		if !ok {
			var err error
			if l, err = h.nl.LinkByName(n.link); err != nil {
				return fmt.Errorf("finding %s in %s: %w", n.link, h.Name, err)
			}
			links[n.link] = l
		}
		family := unix.AF_INET
		if n.ip.Is6() {
			family = unix.AF_INET6
		}
		err := h.nl.NeighSet(&netlink.Neigh{
			LinkIndex:    l.Attrs().Index,
			Family:       family,
			State:        netlink.NUD_PERMANENT,
			IP:           n.ip.AsSlice(),
			HardwareAddr: n.mac,
		})
		if err != nil {
			return fmt.Errorf("adding neighbour %s on %s: %w", n.ip, n.link, err)
		}
	}
	return nil
}

// waitUp waits until a link has carrier and no tentative addresses. Before
// the kernel marks it up, the link drops every packet sent through it.
func (h *Host) waitUp(name string) error {
	deadline := time.Now().Add(upTimeout)
	for {
		err := h.linkReady(name)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s in %s: %w", name, h.Name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *Host) linkReady(name string) error {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		return err
	}
	if s := l.Attrs().OperState; s != netlink.OperUp {
		return fmt.Errorf("link is %s", s)
	}
	addrs, err := h.nl.AddrList(l, unix.AF_INET6)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
			return fmt.Errorf("address %s is tentative", a.IP)
		}
	}
	return nil
}

// flushLinks deletes every link in a namespace but lo. Deleting one end of
// a veth deletes the other, so "not found" along the way is expected.
func flushLinks(nl *netlink.Handle) error {
	links, err := nl.LinkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	var errs []error
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		if err := nl.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}
