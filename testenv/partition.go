package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// A partition lives in the hosts' permanent neighbour entries: a cut host's
// entries for the other's addresses name cutMAC, which no switch port has,
// so the switch drops every frame between the two, whatever the protocol and
// whether or not a connection was already open. Senders see timeouts, as in
// a real partition, rather than an error on send as a blackhole route would
// give. Changing an entry takes effect on the next packet, since sockets
// cache the route but not the MAC. The kernel holds all the state, so
// OpenFleet in another process sees the cuts.

// Partition cuts all traffic between a and b, in both directions; every other
// pair keeps talking. Cutting a pair that is already cut does nothing.
func (f *Fleet) Partition(a, b *Host) error {
	return f.PartitionGroups([]*Host{a}, []*Host{b})
}

// Heal restores traffic between a and b.
func (f *Fleet) Heal(a, b *Host) error {
	return f.HealGroups([]*Host{a}, []*Host{b})
}

// PartitionGroups cuts every host of as from every host of bs. The hosts
// within as, and those within bs, still reach each other.
func (f *Fleet) PartitionGroups(as, bs []*Host) error {
	return f.setCut(as, bs, true)
}

// HealGroups restores traffic between every host of as and every host of bs.
func (f *Fleet) HealGroups(as, bs []*Host) error {
	return f.setCut(as, bs, false)
}

// PartitionRegion cuts every prober of a region (r1, …) off from one host,
// a backend say, as when a region loses its path to a data centre.
func (f *Fleet) PartitionRegion(region string, h *Host) error {
	ps, err := f.region(region)
	if err != nil {
		return err
	}
	return f.PartitionGroups(ps, []*Host{h})
}

// HealRegion undoes PartitionRegion.
func (f *Fleet) HealRegion(region string, h *Host) error {
	ps, err := f.region(region)
	if err != nil {
		return err
	}
	return f.HealGroups(ps, []*Host{h})
}

func (f *Fleet) region(name string) ([]*Host, error) {
	if r := slices.Index(f.Regions, name); r >= 0 {
		return f.Probers[r], nil
	}
	return nil, fmt.Errorf("fleet %s has no region %q", f.prefix, name)
}

// HealAll restores traffic between every pair of hosts.
func (f *Fleet) HealAll() error {
	hosts := f.Hosts()
	return f.setCut(hosts, hosts, false)
}

// Cut reports whether traffic from a to b is cut: whether a's neighbour
// entries for b point nowhere. After Partition both directions are.
func (f *Fleet) Cut(a, b *Host) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range a.neigh {
		if (n.ip == b.V4 || n.ip == b.V6) && bytes.Equal(n.mac, cutMAC) {
			return true
		}
	}
	return false
}

// setCut points the entries of each host of as for the hosts of bs, and the
// reverse, at cutMAC or back at the real MACs. A pair of one host with itself
// is skipped, so HealAll can pass every host as both groups.
func (f *Fleet) setCut(as, bs []*Host, cut bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("changing partitions: fleet is closed")
	}
	for _, h := range append(slices.Clip(as), bs...) {
		if h == nil || f.byRole[h.Role] != h {
			return fmt.Errorf("changing partitions: a host not of fleet %s", f.prefix)
		}
	}
	if len(as) == 1 && len(bs) == 1 && as[0] == bs[0] {
		return fmt.Errorf("changing partitions: %s cannot be cut from itself", as[0].Role)
	}
	var errs []error
	for _, sides := range [][2][]*Host{{as, bs}, {bs, as}} {
		for _, h := range sides[0] {
			errs = append(errs, f.point(h, sides[1], cut))
		}
	}
	return errors.Join(errs...)
}

// point rewrites h's entries for the hosts in to that are not as wanted.
func (f *Fleet) point(h *Host, to []*Host, cut bool) error {
	var changed []neighbour
	for i, n := range h.neigh {
		o := f.byAddr[n.ip]
		if !slices.Contains(to, o) {
			continue
		}
		want := o.MAC
		if cut {
			want = cutMAC
		}
		if !bytes.Equal(n.mac, want) {
			h.neigh[i].mac = want
			changed = append(changed, h.neigh[i])
		}
	}
	if err := h.writeNeighbours(changed); err != nil {
		verb := "healing"
		if cut {
			verb = "cutting"
		}
		return fmt.Errorf("%s partitions of %s: %w", verb, h.Role, err)
	}
	return nil
}
