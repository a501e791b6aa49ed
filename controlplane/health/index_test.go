package health

import (
	"fmt"
	"testing"

	"github.com/steadydns/steadydns/controlplane/config"
)

// checks packs checks of these ids, in this order.
func checks(ids ...string) config.Checks {
	list := make([]*config.Check, len(ids))
	for i, id := range ids {
		list[i] = &config.Check{ID: id, Type: config.CheckTCP}
	}
	return config.NewChecks(list)
}

func TestAssignStable(t *testing.T) {
	ids := []string{"web1", "web2", "db", "api"}
	a, err := Assign(checks(ids...), nil, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Another host with the same config, ids in another order, agrees.
	b, err := Assign(checks("api", "db", "web2", "web1"), nil, 64)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(x *Index, id string) uint32 {
		i, ok := x.Entry(id)
		if !ok {
			t.Fatalf("%s has no entry", id)
		}
		return i
	}
	seen := map[uint32]string{}
	for k, id := range ids {
		ia, ib := entry(a, id), entry(b, id)
		if ia != ib {
			t.Errorf("%s: %d on one host, %d on another", id, ia, ib)
		}
		if ia == 0 || ia >= 64 {
			t.Errorf("%s: index %d outside 1..63", id, ia)
		}
		if other, dup := seen[ia]; dup {
			t.Errorf("%s and %s share index %d", id, other, ia)
		}
		seen[ia] = id
		if a.EntryOf(k) != ia || a.OwnerID(ia) != id {
			t.Errorf("%s: EntryOf %d, owner of %d %q", id, a.EntryOf(k), ia, a.OwnerID(ia))
		}
	}
	for i := range uint32(64) {
		if _, used := seen[i]; !used && a.OwnerID(i) != "" {
			t.Errorf("entry %d owned by %q, which Entry does not place there", i, a.OwnerID(i))
		}
	}
	if _, ok := a.Entry("mail"); ok {
		t.Error("an entry for a check not in the config")
	}
	// A reload that adds checks never moves the existing ones, even when
	// the new ones hash onto their slots.
	more := append([]string(nil), ids...)
	for i := range 40 {
		more = append(more, fmt.Sprintf("new%d", i))
	}
	c, err := Assign(checks(more...), a, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if entry(c, id) != entry(a, id) {
			t.Errorf("%s moved from %d to %d on reload", id, entry(a, id), entry(c, id))
		}
	}
	owned := map[uint32]bool{}
	for _, id := range more {
		owned[entry(c, id)] = true
	}
	if c.Len() != len(more) || len(owned) != len(more) {
		t.Errorf("%d distinct indexes for %d checks", len(owned), len(more))
	}
	if _, err := Assign(checks(more...), nil, 16); err == nil {
		t.Error("44 checks fit a 16-entry table")
	}
}

// TestAssignAsBefore: the entries of a config loaded from scratch are
// those every earlier release gave it (an fnv-1a hash of the id, probing
// forward, new ids in sorted order), so hosts of different releases in
// one fleet agree.
func TestAssignAsBefore(t *testing.T) {
	x, err := Assign(checks("web1", "web2", "db", "api"), nil, 16)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]uint32{"api": 3, "db": 14, "web1": 11, "web2": 8} {
		if got, _ := x.Entry(id); got != want {
			t.Errorf("%s at %d, want %d", id, got, want)
		}
	}
}
