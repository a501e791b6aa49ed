// Package health aggregates checkers' results into the fixed-size health
// table: which entry each check owns, the state of every entry, and the
// push that hands the whole table to a Sink every period, whether or not
// anything changed. Transitions go to an EventLog.
package health

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/steadydns/steadydns/controlplane/config"
)

// Index is the check-to-entry assignment of one config's checks: the
// entry of each check and the check of each entry. It holds no pointer per
// check, for the reason config.Checks does not. Read-only once assigned.
type Index struct {
	checks  config.Checks
	entries []uint32 // per check, in the config's order
	// owners is, per table entry, the position of its check, noCheck if
	// none, or derivedEntry.
	owners  []int32
	regions []string  // server.geo's region names, by id - 1
	derived []Derived // sorted by check position, then region
}

// Derived is the entry that the candidates of one region with one check
// read: up while the check is (entry 0, always up, without one) and the
// region is not shifted away. Shifts thus reach XDP and the fallback
// through the health table alone, and a shift changes no record.
type Derived struct {
	Entry  uint32
	Base   uint32 // the check's entry; 0 for candidates without a check
	Check  int32  // the check's position in the config; -1 for none
	Region uint8  // the region's server.geo id
}

// What owners holds for an entry no check owns.
const (
	noCheck      = -1
	derivedEntry = -2
)

// Assign gives every check a table index. Indexes already assigned in prev
// are kept, so a reload never moves a check. A new check starts at a slot
// derived from a hash of its id and probes forward, so hosts that load the
// same config from scratch agree on every index. Entry 0 is reserved for
// candidates without a check, which are always healthy. prev may be nil.
func Assign(checks config.Checks, prev *Index, capacity int) (*Index, error) {
	return assign(checks, nil, nil, prev, capacity)
}

// AssignConfig is Assign for cfg's checks, which also gives a Derived
// entry to every pair of check and region that cfg's answers use, the
// candidates of a region without a check sharing one. A pair keeps its
// entry across reloads, and takes a fresh one from a hash of its check id
// and region name after every check has its entry, so derived entries
// never move a check.
func AssignConfig(cfg *config.Config, prev *Index) (*Index, error) {
	var regions []string
	if g := cfg.Server.Geo; g != nil {
		for _, r := range g.Regions {
			regions = append(regions, r.Name)
		}
	}
	seen := map[pair]bool{}
	var pairs []pair
	for _, r := range cfg.Records {
		for _, a := range r.Answers {
			if p := (pair{a.Check, a.Region}); a.Region != "" && !seen[p] {
				seen[p] = true
				pairs = append(pairs, p)
			}
		}
	}
	// Fresh entries are taken in the order of the pairs, whatever the
	// file's order.
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(strings.Compare(a.check, b.check), strings.Compare(a.region, b.region))
	})
	return assign(cfg.Checks, pairs, regions, prev, cfg.Aggregation.TableSize)
}

// pair is a check id ("" for none) and a region of answers.
type pair struct{ check, region string }

func assign(checks config.Checks, pairs []pair, regions []string, prev *Index, capacity int) (*Index, error) {
	n := checks.Len()
	if n+len(pairs) > capacity-1 {
		return nil, fmt.Errorf("assigning health-table indexes: %d checks and %d pairs of check and region for %d entries", n, len(pairs), capacity-1)
	}
	x := &Index{checks: checks, entries: make([]uint32, n), owners: make([]int32, capacity), regions: regions}
	for i := range x.owners {
		x.owners[i] = noCheck
	}
	fresh := make([]bool, n)
	for k := range n {
		i, ok := prev.Entry(checks.ID(k))
		if ok && int(i) < capacity && i != 0 && x.owners[i] == noCheck {
			x.entries[k], x.owners[i] = i, int32(k)
			continue
		}
		fresh[k] = true
	}
	slots := uint32(capacity - 1)
	// New checks take their slots in the order of their ids, whatever
	// the file's order.
	for _, k := range checks.ByID() {
		if !fresh[k] {
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(checks.ID(int(k))))
		i := h.Sum32() % slots
		for x.owners[i+1] != noCheck {
			i = (i + 1) % slots
		}
		x.entries[k], x.owners[i+1] = i+1, int32(k)
	}
	x.derive(pairs, prev, slots)
	return x, nil
}

// derive gives each pair its entry: the one it had in prev where that is
// free, else one from a hash of its check id and region name, probing
// forward past the checks' entries.
func (x *Index) derive(pairs []pair, prev *Index, slots uint32) {
	x.derived = make([]Derived, len(pairs))
	at := make([]uint32, len(pairs))
	for d, p := range pairs {
		if i, ok := prev.RegionEntry(p.check, p.region); ok && int(i) < len(x.owners) && i != 0 && x.owners[i] == noCheck {
			at[d], x.owners[i] = i, derivedEntry
		}
	}
	for d, p := range pairs {
		if at[d] != 0 {
			continue
		}
		h := fnv.New32a()
		h.Write([]byte(p.check))
		h.Write([]byte{0})
		h.Write([]byte(p.region))
		i := h.Sum32() % slots
		for x.owners[i+1] != noCheck {
			i = (i + 1) % slots
		}
		at[d], x.owners[i+1] = i+1, derivedEntry
	}
	for d, p := range pairs {
		dv := Derived{Entry: at[d], Check: noCheck, Region: uint8(slices.Index(x.regions, p.region) + 1)}
		if k, ok := x.checks.Find(p.check); ok {
			dv.Check, dv.Base = int32(k), x.entries[k]
		}
		x.derived[d] = dv
	}
	// Sorted for RegionEntry's search.
	slices.SortFunc(x.derived, byCheckRegion)
}

// byCheckRegion orders derived entries by check, then region.
func byCheckRegion(a, b Derived) int {
	return cmp.Or(cmp.Compare(a.Check, b.Check), cmp.Compare(a.Region, b.Region))
}

// Len is the number of checks.
func (x *Index) Len() int { return len(x.entries) }

// Checks are the checks indexed.
func (x *Index) Checks() *config.Checks { return &x.checks }

// Entry is the entry of the check with id. A nil Index has none.
func (x *Index) Entry(id string) (uint32, bool) {
	if x == nil {
		return 0, false
	}
	k, ok := x.checks.Find(id)
	if !ok {
		return 0, false
	}
	return x.entries[k], true
}

// EntryOf is the entry of the config's k-th check.
func (x *Index) EntryOf(k int) uint32 { return x.entries[k] }

// RegionEntry is the Derived entry of the candidates of region with
// check ("" for none). A nil Index has none.
func (x *Index) RegionEntry(check, region string) (uint32, bool) {
	if x == nil {
		return 0, false
	}
	key := Derived{Check: noCheck, Region: uint8(slices.Index(x.regions, region) + 1)}
	if key.Region == 0 {
		return 0, false
	}
	if check != "" {
		k, ok := x.checks.Find(check)
		if !ok {
			return 0, false
		}
		key.Check = int32(k)
	}
	d, ok := slices.BinarySearchFunc(x.derived, key, byCheckRegion)
	if !ok {
		return 0, false
	}
	return x.derived[d].Entry, true
}

// AnswerEntry is the entry a candidate with check and region reads (each
// "" for none): the derived entry with a region, else the check's own,
// else entry 0, always up.
func (x *Index) AnswerEntry(check, region string) (uint32, bool) {
	switch {
	case region != "":
		return x.RegionEntry(check, region)
	case check != "":
		return x.Entry(check)
	}
	return 0, true
}

// Derived lists the derived entries.
func (x *Index) Derived() []Derived { return x.derived }

// Regions are server.geo's region names, by id - 1.
func (x *Index) Regions() []string { return x.regions }

// Owner is the position in the config of the check that owns entry i.
func (x *Index) Owner(i uint32) (int, bool) {
	if int(i) >= len(x.owners) || x.owners[i] < 0 {
		return 0, false
	}
	return int(x.owners[i]), true
}

// OwnerID is the id of the check that owns entry i, or "" if none does.
func (x *Index) OwnerID(i uint32) string {
	if k, ok := x.Owner(i); ok {
		return x.checks.ID(k)
	}
	return ""
}
