package bpf_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/internal/xdptest"
	"github.com/steadydns/steadydns/loader"
)

// TestSlotRewrittenWhileRead: while the loader rewrites a set between two
// versions on one CPU, the program answering it on another answers from
// one version or passes the query, and never mixes the two: every answer
// of a reply has the TTL and the /24 of one version. It runs the program
// as loaded here and with the record table's fences on (seq_fence), as
// it loads where the CPU may reorder loads, so that their code is
// verified and run on any machine.
func TestSlotRewrittenWhileRead(t *testing.T) {
	o := load(t)
	setHealth(t, o)
	spec, err := bpf.LoadSteadydns()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables["seq_fence"].Set(uint32(1)); err != nil {
		t.Fatal(err)
	}
	fenced, err := o.LoadProgramSpec(loader.Options{HealthCapacity: testHealth, ExtCapacity: xdptest.ExtCapacity, Servers: []netip.Addr{server4, server6}}, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer fenced.Close()

	var versions [2]*bpf.SteadydnsRrset
	for i, net := range []int{10, 20} {
		var cs []cand
		for k := 1; k <= 8; k++ {
			cs = append(cs, cand{addr: fmt.Sprintf("198.18.%d.%d", net, k)})
		}
		versions[i] = rrset(uint32(net*10), 8, cs...)
	}
	put(t, o, "www.example.test.", dns.TypeA, versions[0])
	key := loader.RecordKey{Wire: wire(t, "www.example.test."), Qtype: dns.TypeA}

	var done atomic.Bool
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		// On a CPU of its own where there is one; the thread ends with
		// the goroutine.
		runtime.LockOSThread()
		if runtime.NumCPU() > 1 {
			var one unix.CPUSet
			one.Set(1)
			unix.SchedSetaffinity(0, &one)
		}
		for i := 1; !done.Load(); i++ {
			if werr = o.PutRecord(key, versions[i&1]); werr != nil {
				return
			}
		}
	})
	defer func() {
		done.Store(true)
		wg.Wait()
		if werr != nil {
			t.Error(werr)
		}
	}()
	pinCPU(t, 0)
	in := packet.Build(frame(false, query("www.example.test.", dns.TypeA, nil), packet.Full))
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"as loaded", o.Steadydns}, {"fenced", fenced}} {
		answered := 0
		for range 20000 {
			ret, out := runProgram(t, p.prog, in)
			if ret == 2 { // XDP_PASS: the set was being written
				continue
			}
			if ret != 3 {
				t.Fatalf("%s: action %d", p.name, ret)
			}
			r, err := packet.Parse(out)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			var m dns.Msg
			if err := m.Unpack(r.Payload); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if len(m.Answer) != 8 {
				t.Fatalf("%s: %d answers, want 8:\n%v", p.name, len(m.Answer), &m)
			}
			for _, rr := range m.Answer {
				a := rr.(*dns.A)
				if net := int(a.A.To4()[2]); a.Hdr.Ttl != uint32(net*10) || a.A.To4()[2] != m.Answer[0].(*dns.A).A.To4()[2] {
					t.Fatalf("%s: a reply mixes two versions of the set:\n%v", p.name, &m)
				}
			}
			answered++
		}
		if answered == 0 {
			t.Errorf("%s: every query passed", p.name)
		}
	}
}
