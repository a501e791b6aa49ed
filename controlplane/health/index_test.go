package health

import (
	"fmt"
	"testing"
)

func TestAssignStable(t *testing.T) {
	ids := []string{"web1", "web2", "db", "api"}
	a, err := Assign(ids, nil, 64)
	if err != nil {
		t.Fatal(err)
	}
	// Another host with the same config, ids in another order, agrees.
	b, err := Assign([]string{"api", "db", "web2", "web1"}, nil, 64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]string{}
	for _, id := range ids {
		if a[id] != b[id] {
			t.Errorf("%s: %d on one host, %d on another", id, a[id], b[id])
		}
		if a[id] == 0 || a[id] >= 64 {
			t.Errorf("%s: index %d outside 1..63", id, a[id])
		}
		if other, dup := seen[a[id]]; dup {
			t.Errorf("%s and %s share index %d", id, other, a[id])
		}
		seen[a[id]] = id
	}
	// A reload that adds checks never moves the existing ones, even when
	// the new ones hash onto their slots.
	more := append([]string(nil), ids...)
	for i := range 40 {
		more = append(more, fmt.Sprintf("new%d", i))
	}
	c, err := Assign(more, a, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if c[id] != a[id] {
			t.Errorf("%s moved from %d to %d on reload", id, a[id], c[id])
		}
	}
	if len(c) != len(more) {
		t.Errorf("%d indexes for %d checks", len(c), len(more))
	}
	if _, err := Assign(more, nil, 16); err == nil {
		t.Error("44 checks fit a 16-entry table")
	}
}
