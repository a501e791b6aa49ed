package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bpf"
)

// SyncGeo makes the LPM tries hold exactly the given prefixes and writes
// every client region's ranking. New entries go in before old ones leave,
// so no client is unmatched in between.
func (o *Objects) SyncGeo(v4 map[bpf.SteadydnsGeoKey4]bpf.SteadydnsGeoMatch, v6 map[bpf.SteadydnsGeoKey6]bpf.SteadydnsGeoMatch, orders []bpf.SteadydnsGeoOrder) error {
	for i := range orders {
		if err := o.GeoRank.Put(uint32(i), &orders[i]); err != nil {
			return fmt.Errorf("writing the ranking of region %d: %w", i, err)
		}
	}
	if err := syncLPM(o.Geo4, v4); err != nil {
		return fmt.Errorf("writing ipv4 geo prefixes: %w", err)
	}
	if err := syncLPM(o.Geo6, v6); err != nil {
		return fmt.Errorf("writing ipv6 geo prefixes: %w", err)
	}
	return nil
}

func syncLPM[K comparable](m *ebpf.Map, want map[K]bpf.SteadydnsGeoMatch) error {
	for k, v := range want {
		if err := m.Put(&k, &v); err != nil {
			return err
		}
	}
	var stale []K
	var k K
	var v bpf.SteadydnsGeoMatch
	it := m.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stale {
		if err := m.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// PutZoneSOA writes the SOA that NODATA replies for zone i carry.
func (o *Objects) PutZoneSOA(i int, soa *bpf.SteadydnsZoneSoa) error {
	if err := o.Zones.Put(uint32(i), soa); err != nil {
		return fmt.Errorf("writing the soa of zone %d: %w", i, err)
	}
	return nil
}

// MaxZones is how many zones the data plane holds SOAs for.
func (o *Objects) MaxZones() int { return int(o.Zones.MaxEntries()) }
