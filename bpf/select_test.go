package bpf_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// answers queries name over XDP and returns the answered addresses in
// order, or nil when the query was passed.
func answers(t *testing.T, o *loader.Objects, name string) []string {
	t.Helper()
	// The program draws from the port and ID, which clients pick at random.
	f := frame(false, query(name, dns.TypeA, func(m *dns.Msg) { m.Id = uint16(rand.Uint32()) }), packet.Full)
	f.Src = netip.AddrPortFrom(f.Src.Addr(), uint16(1024+rand.IntN(64512)))
	ret, out := run(t, o, packet.Build(f))
	if ret != 3 {
		return nil
	}
	r, err := packet.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var m dns.Msg
	if err := m.Unpack(r.Payload); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, rr := range m.Answer {
		got = append(got, rr.(*dns.A).A.String())
	}
	return got
}

func fullSet(n int) (*bpf.SteadydnsRrset, []string) {
	var cs []cand
	var addrs []string
	for i := range n {
		a := fmt.Sprintf("198.18.3.%d", i+1)
		cs = append(cs, cand{addr: a, check: uint32(10 + i)})
		addrs = append(addrs, a)
	}
	return rrset(60, 8, cs...), addrs
}

// TestColdAndStale: with no table every candidate is answered; with a
// stale table, stale_policy answer_all answers all, keep keeps the table.
// The rule itself is tested in controlplane/selection; this is the XDP
// program reading the metadata the loader writes and the stale timer
// marking it.
func TestColdAndStale(t *testing.T) {
	o := load(t)
	v, addrs := fullSet(4)
	put(t, o, "keep.example.test.", dns.TypeA, v)
	open := *v
	open.Stale = uint8(bpf.SteadydnsStalePolicySTALE_ANSWER_ALL)
	put(t, o, "open.example.test.", dns.TypeA, &open)

	if got := answers(t, o, "keep.example.test."); !slices.Equal(got, addrs) {
		t.Errorf("cold start: %v, want all %v", got, addrs)
	}
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	healthtable.Put(table, 0, true, 0)
	healthtable.Put(table, 11, true, 0)
	// Fresh table: only candidate 1 is up, on both records.
	if _, err := o.PushHealth(table, 7, 0, uint64(3600e9)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep.example.test.", "open.example.test."} {
		if got := answers(t, o, name); !slices.Equal(got, addrs[1:2]) {
			t.Errorf("fresh table, %s: %v, want %v", name, got, addrs[1:2])
		}
	}
	// Stale after 1ns.
	if _, err := o.PushHealth(table, 8, 0, 1); err != nil {
		t.Fatal(err)
	}
	if got := answers(t, o, "keep.example.test."); !slices.Equal(got, addrs[1:2]) {
		t.Errorf("stale table, keep: %v, want %v", got, addrs[1:2])
	}
	if got := answers(t, o, "open.example.test."); !slices.Equal(got, addrs) {
		t.Errorf("stale table, answer_all: %v, want %v", got, addrs)
	}

	// Queries read no clock: the stale timer marks a table once it
	// passes its stale_after. A new push unmarks it at once.
	const after = 300 * time.Millisecond
	if _, err := o.PushHealth(table, 9, 0, uint64(after)); err != nil {
		t.Fatal(err)
	}
	pushed := time.Now()
	if got := answers(t, o, "open.example.test."); !slices.Equal(got, addrs[1:2]) && time.Since(pushed) < after {
		t.Errorf("table pushed %v ago with stale_after %v, answer_all: %v, want %v", time.Since(pushed), after, got, addrs[1:2])
	}
	// The timer fires at stale_after; the deadline is for one that never
	// does, not for a loaded machine's late wakeup.
	time.Sleep(after)
	for got := answers(t, o, "open.example.test."); !slices.Equal(got, addrs); got = answers(t, o, "open.example.test.") {
		if time.Since(pushed) > after+5*time.Second {
			t.Fatalf("%v after the push, answer_all: %v, want all %v: the timer did not mark the table stale", time.Since(pushed), got, addrs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var meta bpf.SteadydnsTableMeta
	if err := o.HealthMeta.Lookup(uint32(0), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.StaleMark != meta.ArrivedNs {
		t.Errorf("stale_mark %d, want the arrival %d", meta.StaleMark, meta.ArrivedNs)
	}
}
