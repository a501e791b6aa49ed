package dnsbench

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/internal/packet"
)

const xdpTX = 3

// queryFrame is the frame of an A query for name i from src to the
// server, as it arrives on the server's veth.
func (r *rig) queryFrame(src netip.Addr, i int) []byte {
	q := new(dns.Msg).SetQuestion(nameOf(i), dns.TypeA)
	q.Id = uint16(i)
	b, err := q.Pack()
	if err != nil {
		panic(err) // a generated name always packs
	}
	return packet.Build(packet.Frame{
		Src:      netip.AddrPortFrom(src, uint16(1024+i%50000)),
		Dst:      netip.AddrPortFrom(r.env.Edge.V4, 53),
		SrcMAC:   [6]byte(r.env.Client.MAC),
		DstMAC:   [6]byte(r.env.Edge.MAC),
		Payload:  b,
		Checksum: packet.Full,
	})
}

// progRunNs is the mean time of one run of prog over frames, in ns, as the
// kernel measures it through BPF_PROG_RUN.
//
// The kernel reuses its copy of the packet between repeats, so from the
// second repeat on a program would see its own reply. Every call here runs
// once on a fresh copy of a query instead, and checks the program's action
// so that a passed packet cannot pass for a fast answer. The kernel's timer
// then also covers some fixed work around the program; the caller subtracts
// what the same loop measures for an XDP_PASS program.
func progRunNs(prog *ebpf.Program, frames [][]byte, iterations int, cpu int, want uint32) (float64, error) {
	// One CPU throughout, the server's, as under load.
	var total time.Duration
	err := onCPU(cpu, func() error {
		for i := range iterations {
			ret, d, err := prog.Benchmark(frames[i%len(frames)], 1, nil)
			if err != nil {
				return err
			}
			if ret != want {
				return fmt.Errorf("running %v on frame %d: action %d, want %d", prog, i%len(frames), ret, want)
			}
			total += d
		}
		return nil
	})
	return float64(total) / float64(iterations), err
}

// onCPU runs f on a thread pinned to cpu, and gives the thread its old
// affinity back.
func onCPU(cpu int, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("reading cpu affinity: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning to cpu %d: %w", cpu, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	return f()
}
