package bpf_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/loader"
)

// BenchmarkTwoCPUs measures how the program scales from one CPU to two: a
// query's cost through BPF_PROG_RUN on one CPU alone (CPU 0, then CPU 1:
// the mean, so that a CPU busier with other work weighs on both figures),
// then on CPUs 0 and 1 at once, each on a thread of its own running the
// same number of calls,
// less an XDP_PASS program's cost measured the same way. Two CPUs answer
// 2 × alone / together as many queries as one; a line written by every
// query on both (a shared counter) would show as a dearer query together.
// The cells: 1,000 names in turn without rate limiting; with it, each CPU
// a client of its own (each its own accounts); and with it, both CPUs one
// client asking one name, so that every query on both writes one account:
// the worst case of RRL's writes, which a client's queries spread by RSS
// over the CPUs meets. Rounds alternate alone and together; every round
// loads each cell's program anew (loadAgain); the figures are the rounds'
// medians. On a shared machine a neighbour taking a CPU shortens the
// overlap, which flatters the ratio; the kernel's timer leaves out the
// time the thread was preempted.
//
//	go test ./bpf -run '^$' -bench TwoCPUs -benchtime 1x
func BenchmarkTwoCPUs(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two CPUs")
	}
	under := loader.RRL{Rate: 1000000, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56}
	off, on := load(b), loadRRL(b, under)
	pass := passProgram(b)
	cs := []cand{{addr: "198.18.9.1", check: 1}}
	var names [][]byte
	for i := range 1000 {
		name := fmt.Sprintf("c%04d.example.test.", i)
		for _, o := range []*loader.Objects{off, on} {
			put(b, o, name, dns.TypeA, rrset(60, 1, cs...))
		}
		names = append(names, query(name, dns.TypeA, nil))
	}
	for _, o := range []*loader.Objects{off, on} {
		setHealth(b, o, 1)
	}
	// frames are the frames of qs asked by client.
	frames := func(client string, qs [][]byte) [][]byte {
		var out [][]byte
		for _, q := range qs {
			out = append(out, from(netip.MustParseAddr(client), q))
		}
		return out
	}
	cells := []struct {
		name string
		o    *loader.Objects
		rrl  loader.RRL
		in   [2][][]byte // each CPU's frames
	}{
		{"names", off, loader.RRL{}, [2][][]byte{frames("198.18.5.1", names), frames("198.18.6.1", names)}},
		{"rrl-apart", on, under, [2][][]byte{frames("198.18.5.1", names), frames("198.18.6.1", names)}},
		{"rrl-shared", on, under, [2][][]byte{frames("198.18.5.1", names[:1]), frames("198.18.5.1", names[:1])}},
	}
	passIn := [2][][]byte{cells[0].in[0][:1], cells[0].in[1][:1]}
	ratio := map[string][]float64{}
	alone := map[string][]float64{}
	for range b.N {
		for round := range rounds {
			oneCPU := func(p *ebpf.Program, in [2][][]byte, want uint32) float64 {
				return (onCPUs(b, p, in, []int{0}, want) + onCPUs(b, p, in, []int{1}, want)) / 2
			}
			base1 := oneCPU(pass, passIn, 2)
			base2 := onCPUs(b, pass, passIn, []int{0, 1}, 2)
			for _, c := range cells {
				p := loadAgain(b, c.o, c.rrl)
				var t1, t2 float64
				// Alone first in even rounds, together first in odd ones.
				if round%2 == 0 {
					t1, t2 = oneCPU(p, c.in, 3), onCPUs(b, p, c.in, []int{0, 1}, 3)
				} else {
					t2, t1 = onCPUs(b, p, c.in, []int{0, 1}, 3), oneCPU(p, c.in, 3)
				}
				p.Close()
				t1, t2 = t1-base1, t2-base2
				alone[c.name] = append(alone[c.name], t1)
				ratio[c.name] = append(ratio[c.name], 2*t1/t2)
			}
		}
	}
	median := func(s []float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, c := range cells {
		b.ReportMetric(median(alone[c.name]), "ns/"+c.name)
		b.ReportMetric(median(ratio[c.name]), "x2cpu/"+c.name)
	}
}

// onCPUs runs prog on cpus at once, each on a thread pinned to it running
// perRound calls over in[cpu], and returns the mean of the kernel's time
// per run over all of them. Every run must return want.
func onCPUs(b *testing.B, prog *ebpf.Program, in [2][][]byte, cpus []int, want uint32) float64 {
	n := len(cpus)
	var wg, ready sync.WaitGroup
	start := make(chan struct{})
	total := make([]time.Duration, n)
	errs := make([]error, n)
	for i, cpu := range cpus {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			// Never unlocked: the goroutine ends on its pinned thread,
			// which then ends too rather than run others on one CPU.
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			err := unix.SchedSetaffinity(0, &set)
			ready.Done()
			if err != nil {
				errs[i] = fmt.Errorf("pinning to cpu %d: %w", cpu, err)
				return
			}
			<-start
			fs := in[cpu]
			for r := range perRound {
				ret, d, err := prog.Benchmark(fs[r%len(fs)], 1, nil)
				if err != nil || ret != want {
					errs[i] = fmt.Errorf("cpu %d, run %d: action %d (want %d), %v", cpu, r, ret, want, err)
					return
				}
				total[i] += d
			}
		}()
	}
	ready.Wait()
	close(start)
	wg.Wait()
	var sum time.Duration
	for i := range n {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		sum += total[i]
	}
	return float64(sum) / float64(n*perRound)
}
