package bpf_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/dnssec"
	"github.com/steadydns/steadydns/controlplane/presign"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// BenchmarkSignedCost measures what a DO=1 answer of a signed set costs
// against DO=0 in the same run, timed as BenchmarkPolicyCost times
// (BPF_PROG_RUN, one run per call, the XDP_PASS program's cost
// subtracted, rounds interleaving the cells): multivalue sets of 3
// answering 2 and of 8 answering 8, every answer set signed ahead. It
// reports each cell's median and DO=1 over DO=0 (the target: at most 1.5).
//
//	go test ./bpf -run '^$' -bench SignedCost -benchtime 1x
func BenchmarkSignedCost(b *testing.B) {
	o := load(b)
	pass := passProgram(b)
	s, _ := zoneSigner(b, "example.test.")
	var addrs8 []string
	for i := range 8 {
		addrs8 = append(addrs8, fmt.Sprintf("198.18.1.%d", i+1))
	}
	two := signedSet(b, o, "two.example.test.", dns.TypeA, s, addrs8[:3]...)
	eight := signedSet(b, o, "eight.example.test.", dns.TypeA, s, addrs8...)
	eight.Value.MaxAnswers = 8
	put(b, o, "eight.example.test.", dns.TypeA, &eight.Value.SteadydnsRrset)
	health := upHealth{1, 2, 3, 4, 5, 6, 7, 8}
	setHealth(b, o, health...)
	p, err := presign.New(o, &health, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	p.Configure([]presign.Set{two, eight}, nil)
	if _, err := p.Sync(time.Now()); err != nil {
		b.Fatal(err)
	}
	var cells []costCell
	for _, set := range []string{"two", "eight"} {
		for _, do := range []bool{false, true} {
			in := packet.Build(frame(false, query(set+".example.test.", dns.TypeA, withOpt(1232, do)), packet.Full))
			ret, out := xdpRun(b, o, in)
			if ret != 3 || !signed(b, out, do) {
				b.Fatalf("%s do=%v: action %d, or RRSIGs not as DO asks", set, do, ret)
			}
			cells = append(cells, costCell{fmt.Sprintf("%s-do%d", set, map[bool]int{false: 0, true: 1}[do]), o.Steadydns, in})
		}
	}
	med := medianCosts(b, pass, cells[0].in, cells)
	for i, c := range cells {
		b.ReportMetric(med[i], "ns/"+c.name)
	}
	b.ReportMetric(med[1]/med[0], "do1/do0-two")
	b.ReportMetric(med[3]/med[2], "do1/do0-eight")
}

// BenchmarkSignedMemory measures the signatures' memory per set: the
// entries a set needs with one candidate down (its answer sets at that
// health and with the table open), and what the kernel accounts for
// each (the sigs map's memlock in fdinfo, over its entries), for
// multivalue (2 at a time), failover (two levels) and weighted sets of 2
// and 8, signed with ECDSA P-256.
//
//	go test ./bpf -run '^$' -bench SignedMemory -benchtime 1x
func BenchmarkSignedMemory(b *testing.B) {
	s, _ := zoneSigner(b, "example.test.")
	policies := []bpf.SteadydnsPolicy{bpf.SteadydnsPolicyPOLICY_MULTIVALUE, bpf.SteadydnsPolicyPOLICY_FAILOVER, bpf.SteadydnsPolicyPOLICY_WEIGHTED}
	for range b.N {
		for _, pol := range policies {
			for _, k := range []int{2, 8} {
				o := load(b)
				var addrs []string
				for i := range k {
					addrs = append(addrs, fmt.Sprintf("198.18.1.%d", i+1))
				}
				set := signedSet(b, o, "www.example.test.", dns.TypeA, s, addrs...)
				v := &set.Value.SteadydnsRrset
				v.Policy = uint8(pol)
				for j := range k {
					v.Cand[j].Priority = uint8(2 * j / k)
					v.Cand[j].Weight = uint8(10 * (j + 1))
				}
				put(b, o, "www.example.test.", dns.TypeA, v)
				var health upHealth
				for j := 2; j <= k; j++ {
					health = append(health, uint32(j))
				}
				setHealth(b, o, health...)
				empty := memlock(b, o)
				now := time.Now()
				p, err := presign.New(o, &health, now)
				if err != nil {
					b.Fatal(err)
				}
				p.Configure([]presign.Set{set}, nil)
				st, err := p.Sync(now)
				if err != nil || st.Entries == 0 {
					b.Fatalf("sync: %d entries, %v", st.Entries, err)
				}
				perEntry := float64(memlock(b, o)-empty) / float64(st.Entries)
				name := fmt.Sprintf("%s-%d", policyName(pol), k)
				b.ReportMetric(float64(st.Entries), "entries/"+name)
				b.ReportMetric(float64(st.Bytes)/float64(st.Entries), "sigbytes/entry-"+name)
				b.ReportMetric(perEntry, "bytes/entry-"+name)
				b.ReportMetric(perEntry*float64(st.Entries), "bytes/set-"+name)
			}
		}
	}
}

// BenchmarkSignedDelay measures the time from a health change to signed
// answers in XDP, as the daemon runs it: the new health table is
// written, the presigner is kicked (the table's OnWrite) and syncs in its
// own goroutine, and a DO=1 query is run with BPF_PROG_RUN until its
// answers are signed at the new health (their TTL tells: 20 with a
// candidate down, 60 with all up). Each query draws its window, and one
// the signatures already cover is served signed at once, so the delay
// runs to the first of 64 signed replies in a row. A multivalue set of
// 8, 2 at a time, ECDSA P-256; flips more than Grace apart, so no entry
// of the health before lingers. Cold: a new signer every flip, so every
// answer set is signed anew; warm: both healths were signed before. It
// reports the median and the slowest of a candidate's going down and
// coming back (whose answers, the open table's, are signed ahead); no
// bound is asserted.
//
//	go test ./bpf -run '^$' -bench SignedDelay -benchtime 1x
func BenchmarkSignedDelay(b *testing.B) {
	for _, cold := range []bool{true, false} {
		b.Run(map[bool]string{true: "cold", false: "warm"}[cold], func(b *testing.B) {
			o := load(b)
			var addrs []string
			for i := range 8 {
				addrs = append(addrs, fmt.Sprintf("198.18.1.%d", i+1))
			}
			s, _ := zoneSigner(b, "example.test.")
			set := signedSet(b, o, "www.example.test.", dns.TypeA, s, addrs...)
			all := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
			h := &lockedHealth{up: all}
			setHealth(b, o, all...)
			p, err := presign.New(o, h, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			p.Configure([]presign.Set{set}, nil)
			if _, err := p.Sync(time.Now()); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { defer close(done); p.Run(stop, time.Second) }()
			defer func() { close(stop); <-done }()
			in := packet.Build(frame(false, query("www.example.test.", dns.TypeA, withOpt(1232, true)), packet.Full))
			delays := map[string][]float64{}
			for range b.N {
				for i := range 10 {
					up, ttl, what := all[1:], uint32(20), "down"
					if i%2 == 1 {
						up, ttl, what = all, 60, "back"
					}
					if cold {
						fresh, err := dnssec.NewSigner("example.test.", s.Keys(), time.Now)
						if err != nil {
							b.Fatal(err)
						}
						set.Zone = fresh
						p.Configure([]presign.Set{set}, nil)
					}
					h.set(up)
					start := time.Now()
					setHealth(b, o, up...)
					p.Kick()
					var first time.Time
					for n, deadline := 0, start.Add(10*time.Second); n < 64; {
						at := time.Now()
						if ret, out := xdpRun(b, o, in); ret != 3 || !signedAt(b, out, ttl) {
							n = 0
						} else if n++; n == 1 {
							first = at
						}
						if at.After(deadline) {
							b.Fatalf("flip %d: answers at TTL %d not all signed in XDP after 10s", i, ttl)
						}
					}
					delays[what] = append(delays[what], float64(first.Sub(start).Microseconds()))
					// Settled: the kicked sync done, then the entries of
					// the health before removed.
					time.Sleep(presign.Grace + 100*time.Millisecond)
					if _, err := p.Sync(time.Now()); err != nil {
						b.Fatal(err)
					}
				}
			}
			for what, d := range delays {
				slices.Sort(d)
				b.ReportMetric(d[len(d)/2], "µs-p50-"+what)
				b.ReportMetric(d[len(d)-1], "µs-max-"+what)
			}
		})
	}
}

// lockedHealth is a health table the benchmark changes while the
// presigner's goroutine reads it.
type lockedHealth struct {
	mu sync.Mutex
	up []uint32
}

func (h *lockedHealth) set(up []uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.up = up
}

func (h *lockedHealth) Up(i uint32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return i == 0 || slices.Contains(h.up, i)
}

func (h *lockedHealth) Open(uint8) bool { return false }

func xdpRun(b testing.TB, o *loader.Objects, in []byte) (uint32, []byte) {
	b.Helper()
	return runProgram(b, o.Steadydns, in)
}

// signed says whether a reply carries RRSIGs (want) or none (!want).
func signed(b testing.TB, out []byte, want bool) bool {
	m := reply(b, out)
	n := 0
	for _, rr := range m.Answer {
		if rr.Header().Rrtype == dns.TypeRRSIG {
			n++
		}
	}
	return (n > 0) == want
}

// signedAt says whether a reply holds answers at ttl and their RRSIG.
func signedAt(b testing.TB, out []byte, ttl uint32) bool {
	m := reply(b, out)
	return len(m.Answer) > 0 && m.Answer[0].Header().Ttl == ttl && signed(b, out, true)
}

func reply(b testing.TB, out []byte) *dns.Msg {
	b.Helper()
	r, err := packet.Parse(out)
	if err != nil {
		b.Fatal(err)
	}
	var m dns.Msg
	if err := m.Unpack(r.Payload); err != nil {
		b.Fatalf("unpacking: %v", err)
	}
	return &m
}

// memlock is the sigs map's memory as the kernel accounts it.
func memlock(b testing.TB, o *loader.Objects) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", o.Sigs.FD()))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "memlock:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no memlock in the sigs map's fdinfo")
	return 0
}
