// Package health aggregates checkers' results into the fixed-size health
// table: which entry each check owns, the state of every entry, and the
// push that hands the whole table to a Sink every period, whether or not
// anything changed. Transitions go to an EventLog.
package health

import (
	"fmt"
	"hash/fnv"
	"sort"
)

// Assign gives every check a table index. Indexes already assigned in prev
// are kept, so a reload never moves a check. A new check starts at a slot
// derived from a hash of its id and probes forward, so hosts that load the
// same config from scratch agree on every index. Entry 0 is reserved for
// candidates without a check, which are always healthy.
func Assign(ids []string, prev map[string]uint32, capacity int) (map[string]uint32, error) {
	if len(ids) > capacity-1 {
		return nil, fmt.Errorf("assigning health-table indexes: %d checks for %d entries", len(ids), capacity-1)
	}
	out := make(map[string]uint32, len(ids))
	used := make(map[uint32]bool, len(ids))
	var fresh []string
	for _, id := range ids {
		if i, ok := prev[id]; ok && int(i) < capacity && i != 0 && !used[i] {
			out[id] = i
			used[i] = true
			continue
		}
		fresh = append(fresh, id)
	}
	sort.Strings(fresh)
	slots := uint32(capacity - 1)
	for _, id := range fresh {
		h := fnv.New32a()
		h.Write([]byte(id))
		i := h.Sum32() % slots
		for used[i+1] {
			i = (i + 1) % slots
		}
		out[id] = i + 1
		used[i+1] = true
	}
	return out, nil
}
