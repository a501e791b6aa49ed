package xdpprog_test

import (
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bench/xdpprog"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/internal/xdptest"
	"github.com/steadydns/steadydns/loader"
)

// reflector loads the bare reflector, closed when t ends.
func reflector(t *testing.T) *ebpf.Program {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	var objs xdpprog.ReflectorObjects
	if err := xdpprog.LoadReflectorObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return objs.Reflector
}

// The reflector is the benchmark's ceiling; its replies must still be
// well-formed, or kxdpgun would not count them.
func TestReflector(t *testing.T) {
	refl := reflector(t)
	for _, v6 := range []bool{false, true} {
		f := frame(v6, query("www.example.test.", dns.TypeA, nil), packet.Full)
		ret, out := runProgram(t, refl, packet.Build(f))
		if ret != 3 {
			t.Fatalf("v6=%v: action %d", v6, ret)
		}
		r, err := packet.Parse(out)
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

// The table read is the reflector plus one read of the record table: its
// reply must be the reflector's, byte for byte, whatever the slot holds,
// and a query too short for its hash goes to the stack as the reflector
// would not.
func TestTableRead(t *testing.T) {
	refl := reflector(t)
	spec, err := xdpprog.LoadTableRead()
	if err != nil {
		t.Fatal(err)
	}
	// A small table of its own, unpinned.
	for _, name := range []string{"records", "rec_exts", "rec_size", "rec_pools"} {
		spec.Maps[name].Pinning = ebpf.PinNone
	}
	spec.Maps["records"].MaxEntries = 1024
	var tr xdpprog.TableReadObjects
	if err := spec.LoadAndAssign(&tr, nil); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.RecSize.Put(uint32(0), uint32(1024)); err != nil {
		t.Fatal(err)
	}
	// Every slot holds a set, so the read finds one wherever it lands.
	var slot bpf.SteadydnsRecSlot
	slot.State, slot.Hash = uint8(bpf.SteadydnsSlotStateSLOT_USED), ^uint64(0)
	for i := range uint32(1024) {
		if err := tr.Records.Put(i, &slot); err != nil {
			t.Fatal(err)
		}
	}
	for _, v6 := range []bool{false, true} {
		for _, name := range []string{"www.example.test.", "n1.bench.test.", "a-much-longer-name.of.several.labels.test."} {
			data := packet.Build(frame(v6, query(name, dns.TypeAAAA, nil), packet.Full))
			reflRet, want := runProgram(t, refl, data)
			readRet, got := runProgram(t, tr.TableRead, data)
			if reflRet != 3 || readRet != 3 || string(got) != string(want) {
				t.Errorf("v6=%v %s: table read %d, reflector %d; replies equal: %v", v6, name, readRet, reflRet, string(got) == string(want))
			}
		}
		// "." makes a question of 5 bytes: the table read hashes 16.
		if ret, _ := runProgram(t, tr.TableRead, packet.Build(frame(v6, query(".", dns.TypeA, nil), packet.Full))); ret != 2 {
			t.Errorf("v6=%v: a question shorter than 16 bytes got action %d, want XDP_PASS", v6, ret)
		}
	}
}

// The stage builds are the program cut after a stage (STAGE_END): each
// must send the reflector's reply, byte for byte, and count nothing, once
// its stage is done, and must do its stage and the ones before it: a name
// the table lacks is reflected by parse and hash, which do not look it
// up, and passed from lookup on, which do. The cut after grow sends the
// frame grown by the answers' bytes, the query's headers and question
// reflected at its start.
func TestStageBuilds(t *testing.T) {
	o := load(t)
	fixtures(t, o)
	refl := reflector(t)
	stages := []struct {
		name   string
		spec   func() (*ebpf.CollectionSpec, error)
		lookup bool // the stage looks the name up
		grows  bool // the stage grows the frame by the answers
	}{
		{"parse", xdpprog.LoadStageParse, false, false},
		{"hash", xdpprog.LoadStageHash, false, false},
		{"lookup", xdpprog.LoadStageLookup, true, false},
		{"select", xdpprog.LoadStageSelect, true, false},
		{"grow", xdpprog.LoadStageGrow, true, true},
	}
	for _, st := range stages {
		spec, err := st.spec()
		if err != nil {
			t.Fatal(err)
		}
		p, err := o.LoadProgramSpec(loader.Options{HealthCapacity: testHealth, ExtCapacity: xdptest.ExtCapacity, Servers: []netip.Addr{server4, server6}}, spec)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		defer p.Close()
		for _, v6 := range []bool{false, true} {
			for _, q := range []struct {
				name  string
				qtype uint16
				grown int // the answers' bytes
			}{{"www.example.test.", dns.TypeA, 3 * 16}, {"WWW.Example.TEST.", dns.TypeAAAA, 2 * 28}, {name255, dns.TypeAAAA, 28}} {
				data := packet.Build(frame(v6, query(q.name, q.qtype, withOpt(1232, true)), packet.Full))
				before, err := o.Outcomes()
				if err != nil {
					t.Fatal(err)
				}
				_, want := runProgram(t, refl, data)
				ret, got := runProgram(t, p, data)
				after, err := o.Outcomes()
				if err != nil {
					t.Fatal(err)
				}
				if st.grows {
					// The OPT, 11 bytes, ends the query: what follows
					// the question is the frame's old bytes.
					keep := len(want) - 11
					if ret != 3 || len(got) != len(want)+q.grown || string(got[:keep]) != string(want[:keep]) {
						t.Errorf("%s, v6=%v, %s %d: action %d, %d bytes, want %d; the reflector's headers and question: %v", st.name, v6, q.name, q.qtype, ret, len(got), len(want)+q.grown, string(got[:keep]) == string(want[:keep]))
					}
				} else if ret != 3 || string(got) != string(want) {
					t.Errorf("%s, v6=%v, %s %d: action %d; the reflector's reply: %v", st.name, v6, q.name, q.qtype, ret, string(got) == string(want))
				}
				if !slices.Equal(before, after) {
					t.Errorf("%s, v6=%v, %s %d: outcomes %v → %v, want none counted", st.name, v6, q.name, q.qtype, before, after)
				}
			}
			data := packet.Build(frame(v6, query("absent.example.test.", dns.TypeA, nil), packet.Full))
			want := uint32(3)
			if st.lookup {
				want = 2
			}
			if ret, _ := runProgram(t, p, data); ret != want {
				t.Errorf("%s, v6=%v: a name not in the table got action %d, want %d", st.name, v6, ret, want)
			}
		}
	}
}
