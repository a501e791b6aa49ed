package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// FleetOptions configures NewFleet. Zero counts take the defaults.
type FleetOptions struct {
	Prefix           string // as in Options
	Regions          int    // prober regions r1, r2, …; default 3, at most MaxRegions
	ProbersPerRegion int    // default 2, at most MaxProbersPerRegion
	Edges            int    // default 2, at most MaxPerRole
	Aggregators      int    // default 2, at most MaxPerRole
	Backends         int    // 0 to MaxPerRole
}

// Fleet is a client, DNS edges, aggregators, probers in regions and
// backends, each in its own namespace with one veth to a bridge in a switch
// namespace: every host reaches every other directly, as on one LAN, until
// Partition cuts a pair.
type Fleet struct {
	Client      *Host
	Edges       []*Host   // Edges[i-1] is e<i>
	Aggregators []*Host   // Aggregators[i-1] is a<i>
	Regions     []string  // r1, r2, …: the names to give probers with `serve --region`
	Probers     [][]*Host // Probers[r] are the probers of Regions[r]: p1a, p1b, … for r1
	Backends    []*Host   // Backends[i-1] is b<i>

	// Switch holds the bridge (its Link) and one port per host, the Peer of
	// that host's Link. It has no addresses and is not among Hosts.
	Switch *Host

	prefix string
	byRole map[string]*Host
	byAddr map[netip.Addr]*Host
	owned  bool // made by NewFleet rather than found by OpenFleet, so Close removes it
	mu     sync.Mutex
	closed bool
}

// NewFleet builds a fleet and returns once every link carries traffic. If it
// fails halfway it removes what it made. Call Close when done.
func NewFleet(opts FleetOptions) (*Fleet, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	p := opts.Prefix
	var members []member
	members = append(members, member{kind: kindClient, index: 1})
	for i := 1; i <= opts.Edges; i++ {
		members = append(members, member{kind: kindEdge, index: i})
	}
	for i := 1; i <= opts.Aggregators; i++ {
		members = append(members, member{kind: kindAggregator, index: i})
	}
	for r := 1; r <= opts.Regions; r++ {
		for j := 1; j <= opts.ProbersPerRegion; j++ {
			members = append(members, member{kind: kindProber, region: r, index: j})
		}
	}
	for i := 1; i <= opts.Backends; i++ {
		members = append(members, member{kind: kindBackend, index: i})
	}
	f, err := newFleet(p, members)
	if err != nil {
		return nil, err
	}
	f.owned = true
	if err := f.build(); err != nil {
		return nil, errors.Join(fmt.Errorf("building fleet %s: %w", p, err), f.Close())
	}
	return f, nil
}

func (o *FleetOptions) fill() error {
	if o.Prefix == "" {
		o.Prefix = "sd"
	}
	if err := checkPrefix(o.Prefix); err != nil {
		return err
	}
	for _, c := range []struct {
		name          string
		n             *int
		def, min, max int
	}{
		{"regions", &o.Regions, 3, 1, MaxRegions},
		{"probers per region", &o.ProbersPerRegion, 2, 1, MaxProbersPerRegion},
		{"edges", &o.Edges, 2, 1, MaxPerRole},
		{"aggregators", &o.Aggregators, 2, 1, MaxPerRole},
		{"backends", &o.Backends, 0, 0, MaxPerRole},
	} {
		if *c.n == 0 {
			*c.n = c.def
		}
		if *c.n < c.min || *c.n > c.max {
			return fmt.Errorf("%s %d: want %d to %d", c.name, *c.n, c.min, c.max)
		}
	}
	return nil
}

// newFleet lays out the hosts for members, which must hold a client and
// every index from 1 up to the largest of each kind, so that Edges[i-1] is
// e<i> and so on.
func newFleet(p string, members []member) (*Fleet, error) {
	sw := newHost(switchNS(p), "switch", switchBridge(p), "", fleetBridgeMAC, netip.Addr{}, netip.Addr{})
	f := &Fleet{Switch: sw, prefix: p, byRole: map[string]*Host{}, byAddr: map[netip.Addr]*Host{}}
	for _, m := range members {
		h := newHost(fleetNS(p, m), m.role(), fleetLink(p, m), fleetPort(p, m), m.mac(), m.v4(), m.v6())
		f.byRole[h.Role] = h
		f.byAddr[h.V4], f.byAddr[h.V6] = h, h
		var list *[]*Host
		switch m.kind {
		case kindClient:
			f.Client = h
			continue
		case kindEdge:
			list = &f.Edges
		case kindAggregator:
			list = &f.Aggregators
		case kindBackend:
			list = &f.Backends
		case kindProber:
			for len(f.Probers) < m.region {
				f.Regions = append(f.Regions, regionName(len(f.Probers)+1))
				f.Probers = append(f.Probers, nil)
			}
			list = &f.Probers[m.region-1]
		}
		if len(*list)+1 != m.index {
			return nil, fmt.Errorf("fleet %s has %s but not the hosts before it", p, h.Role)
		}
		*list = append(*list, h)
	}
	if f.Client == nil {
		return nil, fmt.Errorf("fleet %s has no client", p)
	}
	for r, ps := range f.Probers {
		if len(ps) == 0 {
			return nil, fmt.Errorf("fleet %s has no probers in %s", p, f.Regions[r])
		}
	}
	return f, nil
}

// Hosts lists the client, the edges, the aggregators, the probers region by
// region and the backends, in that order.
func (f *Fleet) Hosts() []*Host {
	hosts := []*Host{f.Client}
	hosts = append(hosts, f.Edges...)
	hosts = append(hosts, f.Aggregators...)
	for _, ps := range f.Probers {
		hosts = append(hosts, ps...)
	}
	return append(hosts, f.Backends...)
}

// Prefix is the name prefix the fleet was built with.
func (f *Fleet) Prefix() string { return f.prefix }

// Lookup finds hosts by the names the CLI takes: a role (client, e1, a2,
// p1a, b3) names one host, a region (r1) all of its probers.
func (f *Fleet) Lookup(name string) ([]*Host, error) {
	if h, ok := f.byRole[name]; ok {
		return []*Host{h}, nil
	}
	if ps, err := f.region(name); err == nil {
		return ps, nil
	}
	return nil, fmt.Errorf("fleet %s has no host or region %q (try client, e1, a1, r1, p1a, b1)", f.prefix, name)
}

func (f *Fleet) build() error {
	sw := f.Switch
	if err := sw.open(); err != nil {
		return err
	}
	for _, h := range f.Hosts() {
		if err := h.open(); err != nil {
			return err
		}
	}
	if err := addBridge(sw, sw.Link, sw.MAC); err != nil {
		return err
	}
	if err := configure(sw, sw.Link); err != nil {
		return err
	}
	for _, h := range f.Hosts() {
		if err := addVeth(h, h.Link, h.MAC, sw, h.Peer, fleetPortMAC(h.MAC)); err != nil {
			return err
		}
		if err := addPort(sw, h.Peer, sw.Link, h.MAC); err != nil {
			return err
		}
	}
	for _, h := range f.Hosts() {
		if err := configure(h, h.Link, netip.PrefixFrom(h.V4, fleetV4Bits), netip.PrefixFrom(h.V6, fleetV6Bits)); err != nil {
			return err
		}
		h.neigh = f.neighbours(h)
		if err := h.setNeighbours(); err != nil {
			return err
		}
	}
	for _, h := range f.Hosts() {
		if err := h.waitUp(h.Link); err != nil {
			return err
		}
		if err := sw.waitUp(h.Peer); err != nil {
			return err
		}
	}
	return sw.waitUp(sw.Link)
}

// neighbours lists h's entry for every other host, with its real MAC.
func (f *Fleet) neighbours(h *Host) []neighbour {
	var ns []neighbour
	for _, o := range f.Hosts() {
		if o != h {
			ns = append(ns, neighbour{h.Link, o.V4, o.MAC}, neighbour{h.Link, o.V6, o.MAC})
		}
	}
	return ns
}

// OpenFleet finds the fleet that NewFleet (`steadydns testenv up --fleet`)
// left with prefix p, for Partition and Heal from another process. It reads
// which hosts there are from the namespace names, and which pairs are cut
// from the hosts' neighbour entries, so it needs no state of its own. Close
// releases the handles and leaves the fleet standing.
func OpenFleet(p string) (*Fleet, error) {
	if err := checkPrefix(p); err != nil {
		return nil, err
	}
	members, err := findFleet(p)
	if err != nil {
		return nil, err
	}
	f, err := newFleet(p, members)
	if err != nil {
		return nil, err
	}
	if err := f.attach(); err != nil {
		return nil, errors.Join(fmt.Errorf("opening fleet %s: %w", p, err), f.Close())
	}
	return f, nil
}

// findFleet lists the members whose namespaces exist, in NewFleet's order.
func findFleet(p string) ([]member, error) {
	if _, err := os.Stat(nsPath(switchNS(p))); err != nil {
		return nil, fmt.Errorf("finding fleet %s (did `steadydns testenv up --fleet --prefix %s` run?): %w", p, p, err)
	}
	entries, err := os.ReadDir(nsDir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", nsDir, err)
	}
	var members []member
	for _, ent := range entries {
		if rest, ok := strings.CutPrefix(ent.Name(), p+"-"); ok {
			if m, ok := parseShort(rest); ok {
				members = append(members, m)
			}
		}
	}
	order := map[byte]int{kindClient: 0, kindEdge: 1, kindAggregator: 2, kindProber: 3, kindBackend: 4}
	slices.SortFunc(members, func(a, b member) int {
		if d := order[a.kind] - order[b.kind]; d != 0 {
			return d
		}
		if d := a.region - b.region; d != 0 {
			return d
		}
		return a.index - b.index
	})
	return members, nil
}

// attach opens handles on the namespaces of a fleet that already stands and
// reads back which neighbour entries point at cutMAC.
func (f *Fleet) attach() error {
	for _, h := range append([]*Host{f.Switch}, f.Hosts()...) {
		ns, err := netns.GetFromPath(h.NSPath())
		if err != nil {
			return fmt.Errorf("opening %s: %w", h.Name, err)
		}
		h.ns = ns
		if h.nl, err = netlink.NewHandleAt(ns); err != nil {
			return fmt.Errorf("opening netlink in %s: %w", h.Name, err)
		}
	}
	for _, h := range f.Hosts() {
		h.neigh = f.neighbours(h)
		cut, err := h.cutAddrs()
		if err != nil {
			return err
		}
		for i, n := range h.neigh {
			if cut[n.ip] {
				h.neigh[i].mac = cutMAC
			}
		}
	}
	return nil
}

// cutAddrs lists the addresses whose neighbour entries on h's link point at
// cutMAC.
func (h *Host) cutAddrs() (map[netip.Addr]bool, error) {
	l, err := h.nl.LinkByName(h.Link)
	if err != nil {
		return nil, fmt.Errorf("finding %s in %s: %w", h.Link, h.Name, err)
	}
	cut := map[netip.Addr]bool{}
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		entries, err := h.nl.NeighList(l.Attrs().Index, family)
		if err != nil {
			return nil, fmt.Errorf("listing neighbours in %s: %w", h.Name, err)
		}
		for _, n := range entries {
			if a, ok := netip.AddrFromSlice(n.IP); ok && bytes.Equal(n.HardwareAddr, cutMAC) {
				cut[a.Unmap()] = true
			}
		}
	}
	return cut, nil
}

// Close removes every link and namespace of a fleet that NewFleet built, or
// only lets go of one that OpenFleet found. It is safe to call more than
// once and on a fleet that NewFleet gave up on halfway.
func (f *Fleet) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var errs []error
	for _, h := range append(f.Hosts(), f.Switch) {
		if f.owned {
			errs = append(errs, h.close())
		} else {
			h.release()
		}
	}
	return errors.Join(errs...)
}
