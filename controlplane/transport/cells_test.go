package transport

import (
	"bytes"
	"testing"
	"time"
)

func TestSubjects(t *testing.T) {
	for _, tc := range []struct {
		kind               Kind
		cell, sender, want string
	}{
		{KindFrame, "eu", "p1", "steadydns.frame.eu.p1"},
		{KindTable, "us-2", "a1", "steadydns.table.us-2.a1"},
		{KindState, "eu", "e1", "steadydns.state.e1"},
	} {
		s := Subject(tc.kind, tc.cell, tc.sender)
		if s != tc.want {
			t.Errorf("Subject(%s, %s, %s) = %s, want %s", tc.kind, tc.cell, tc.sender, s, tc.want)
		}
		k, cell, sender, ok := parseSubject(s)
		wantCell := tc.cell
		if tc.kind == KindState {
			wantCell = ""
		}
		if !ok || k != tc.kind || cell != wantCell || sender != tc.sender {
			t.Errorf("parseSubject(%s) = %s %q %q %v", s, k, cell, sender, ok)
		}
	}
	for _, bad := range []string{"steadydns.frame.p1", "steadydns.table.eu.a1.x", "steadydns.state.eu.e1", "steadydns.frame..p1", "other.frame.eu.p1", "steadydns.votes.eu.p1"} {
		if _, _, _, ok := parseSubject(bad); ok {
			t.Errorf("parseSubject(%s) accepted", bad)
		}
	}
	if got := SubjectAll(KindFrame, AllCells); got != "steadydns.frame.*.*" {
		t.Errorf("SubjectAll(frame, every cell) = %s", got)
	}
}

// TestCells: an aggregator that subscribes to its cell's frames gets none
// of another cell's; an edge that subscribes to every cell's tables gets
// each with its cell; and the server counts the edges connected to it by
// their keys.
func TestCells(t *testing.T) {
	f := newFleet(t, "p1", "eu", "p2", "us", "a1", "eu", "a2", "us")
	s := embed(t, f, EmbedOptions{})
	pEU := connect(t, s.ClientURL(), "p1", f.prober, Options{Cell: "eu"})
	pUS := connect(t, s.ClientURL(), "p2", f.ids["p2"], Options{Cell: "us"})
	aEU := connect(t, s.ClientURL(), "a1", f.aggregator, Options{Cell: "eu"})
	aUS := connect(t, s.ClientURL(), "a2", f.ids["a2"], Options{Cell: "us"})
	edge := connect(t, s.ClientURL(), "e1", f.edge, Options{})
	var frames, tables inbox
	if _, err := aEU.Subscribe(KindFrame, "eu", Filter{}, frames.fn); err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Subscribe(KindTable, AllCells, Filter{}, tables.fn); err != nil {
		t.Fatal(err)
	}
	flush(t, aEU)
	flush(t, edge)
	for i, c := range []*Conn{pEU, pUS} {
		if err := c.Publish(KindFrame, 1, 7, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []*Conn{aEU, aUS} {
		if err := c.Publish(KindTable, 1, 7, []byte{byte(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, func() bool { return len(tables.messages()) == 2 }, "both cells' tables at the edge")
	flush(t, pUS)
	flush(t, aEU)
	got := frames.messages()
	if len(got) != 1 || got[0].Cell != "eu" || got[0].Sender != "p1" || !bytes.Equal(got[0].Payload, []byte{0}) {
		t.Fatalf("the eu aggregator got %+v, want only p1's frame in cell eu", got)
	}
	cells := map[string]string{}
	for _, m := range tables.messages() {
		cells[m.Sender] = m.Cell
	}
	if cells["a1"] != "eu" || cells["a2"] != "us" {
		t.Fatalf("tables by sender and cell: %v", cells)
	}
	n, err := s.ClientsWithKeys([]string{f.edge.Public})
	if err != nil || n != 1 {
		t.Fatalf("edges connected: %d, %v; want 1", n, err)
	}
	if n, _ := s.ClientsWithKeys([]string{f.prober.Public, f.ids["p2"].Public}); n != 2 {
		t.Fatalf("probers connected: %d, want 2", n)
	}
}
