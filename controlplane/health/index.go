// Package health aggregates checkers' results into the fixed-size health
// table: which entry each check owns, the state of every entry, and the
// push that hands the whole table to a Sink every period, whether or not
// anything changed. Transitions go to an EventLog.
package health

import (
	"fmt"
	"hash/fnv"

	"github.com/steadydns/steadydns/controlplane/config"
)

// Index is the check-to-entry assignment of one config's checks: the
// entry of each check and the check of each entry. It holds no pointer per
// check, for the reason config.Checks does not. Read-only once assigned.
type Index struct {
	checks  config.Checks
	entries []uint32 // per check, in the config's order
	owners  []int32  // per table entry: the position of its check; noCheck if none
}

const noCheck = -1

// Assign gives every check a table index. Indexes already assigned in prev
// are kept, so a reload never moves a check. A new check starts at a slot
// derived from a hash of its id and probes forward, so hosts that load the
// same config from scratch agree on every index. Entry 0 is reserved for
// candidates without a check, which are always healthy. prev may be nil.
func Assign(checks config.Checks, prev *Index, capacity int) (*Index, error) {
	n := checks.Len()
	if n > capacity-1 {
		return nil, fmt.Errorf("assigning health-table indexes: %d checks for %d entries", n, capacity-1)
	}
	x := &Index{checks: checks, entries: make([]uint32, n), owners: make([]int32, capacity)}
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
	return x, nil
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

// Owner is the position in the config of the check that owns entry i.
func (x *Index) Owner(i uint32) (int, bool) {
	if int(i) >= len(x.owners) || x.owners[i] == noCheck {
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
