package health

import "github.com/steadydns/steadydns/controlplane/config"

// IndexAt is an index that places each check at the entry entries gives
// its id, for tests that choose the entries Assign would derive.
func IndexAt(checks config.Checks, entries map[string]uint32, capacity int) *Index {
	x := &Index{checks: checks, entries: make([]uint32, checks.Len()), owners: make([]int32, capacity)}
	for i := range x.owners {
		x.owners[i] = noCheck
	}
	for k := range checks.Len() {
		i := entries[checks.ID(k)]
		x.entries[k], x.owners[i] = i, int32(k)
	}
	return x
}
