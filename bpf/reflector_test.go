package bpf_test

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
)

// The reflector is the benchmark's ceiling; its replies must still be
// well-formed, or kxdpgun would not count them.
func TestReflector(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	var objs bpf.ReflectorObjects
	if err := bpf.LoadReflectorObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	for _, v6 := range []bool{false, true} {
		f := frame(v6, query("www.example.test.", dns.TypeA, nil), packet.Full)
		opts := &ebpf.RunOptions{Data: packet.Build(f), DataOut: make([]byte, 4096)}
		ret, err := objs.Reflector.Run(opts)
		if err != nil || ret != 3 {
			t.Fatalf("v6=%v: action %d, %v", v6, ret, err)
		}
		r, err := packet.Parse(opts.DataOut)
		if err != nil {
			t.Fatalf("v6=%v: %v", v6, err)
		}
		if r.Src != f.Dst || r.Dst != f.Src {
			t.Errorf("v6=%v: %v→%v", v6, r.Src, r.Dst)
		}
		var m dns.Msg
		if err := m.Unpack(r.Payload); err != nil || !m.Response || m.Id != 0x1234 {
			t.Errorf("v6=%v: reply %v %v", v6, &m, err)
		}
	}
}

// The table floor is the reflector plus one read of the record table: its
// reply must be the reflector's, byte for byte, whatever the slot holds,
// and a query too short for its hash goes to the stack as the reflector
// would not.
func TestTableFloor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	var refl bpf.ReflectorObjects
	if err := bpf.LoadReflectorObjects(&refl, nil); err != nil {
		t.Fatal(err)
	}
	defer refl.Close()
	spec, err := bpf.LoadFloor()
	if err != nil {
		t.Fatal(err)
	}
	// A small table of its own, unpinned.
	for _, name := range []string{"records", "rec_tags", "rec_bits"} {
		spec.Maps[name].Pinning = ebpf.PinNone
	}
	spec.Maps["records"].MaxEntries = 1024
	spec.Maps["rec_tags"].MaxEntries = 1024
	var floor bpf.FloorObjects
	if err := spec.LoadAndAssign(&floor, nil); err != nil {
		t.Fatal(err)
	}
	defer floor.Close()
	if err := floor.RecBits.Put(uint32(0), uint32(10)); err != nil {
		t.Fatal(err)
	}
	// Every slot holds a set, so the read finds one wherever it lands.
	var slot bpf.SteadydnsRecSlot
	slot.State, slot.Hash = uint8(bpf.SteadydnsSlotStateSLOT_USED), ^uint64(0)
	for i := range uint32(1024) {
		if err := floor.Records.Put(i, &slot); err != nil {
			t.Fatal(err)
		}
	}
	run := func(p *ebpf.Program, data []byte) (uint32, []byte) {
		t.Helper()
		opts := &ebpf.RunOptions{Data: data, DataOut: make([]byte, 4096)}
		ret, err := p.Run(opts)
		if err != nil {
			t.Fatal(err)
		}
		return ret, opts.DataOut
	}
	for _, v6 := range []bool{false, true} {
		for _, name := range []string{"www.example.test.", "n1.bench.test.", "a-much-longer-name.of.several.labels.test."} {
			data := packet.Build(frame(v6, query(name, dns.TypeAAAA, nil), packet.Full))
			rr, want := run(refl.Reflector, data)
			fr, got := run(floor.TableFloor, data)
			if rr != 3 || fr != 3 || string(got) != string(want) {
				t.Errorf("v6=%v %s: floor %d, reflector %d; replies equal: %v", v6, name, fr, rr, string(got) == string(want))
			}
		}
		// "." makes a question of 5 bytes: the floor hashes 16.
		if ret, _ := run(floor.TableFloor, packet.Build(frame(v6, query(".", dns.TypeA, nil), packet.Full))); ret != 2 {
			t.Errorf("v6=%v: a question shorter than 16 bytes got action %d, want XDP_PASS", v6, ret)
		}
	}
}
