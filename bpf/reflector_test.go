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
