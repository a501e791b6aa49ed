package fallback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/zone"
)

// oneSet answers every dynamic name with the same selection without
// allocating, so the benchmark measures the handler alone.
type oneSet struct{ sel Selection }

func (o oneSet) Select(_ string, _ uint16, _ Query, into []netip.Addr) (Selection, bool) {
	sel := o.sel
	sel.Addrs = append(into[:0], sel.Addrs...)
	return sel, true
}

// BenchmarkServeUDP answers one datagram as a UDP loop does: parse,
// screen, build the reply and pack it into the loop's buffer, in a batch
// whose clock the loop has read.
func BenchmarkServeUDP(b *testing.B) {
	v, _ := exampleView(b)
	v.Records = oneSet{dynamicSets["web.example.test. A"]}
	s := New(Options{}, v)
	for _, c := range []struct {
		name  string
		qname string
		qtype uint16
		edns  bool
	}{
		{"dynamic A", "web.example.test.", dns.TypeA, false},
		{"dynamic A with EDNS", "web.example.test.", dns.TypeA, true},
		{"zone A", "static.example.test.", dns.TypeA, false},
		{"zone MX", "example.test.", dns.TypeMX, false},
		{"NXDOMAIN", "nope.example.test.", dns.TypeA, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := query(c.qname, c.qtype)
			if c.edns {
				m.SetEdns0(1232, false)
			}
			raw, err := m.Pack()
			if err != nil {
				b.Fatal(err)
			}
			remote := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.10:5300"))
			w := &replyWriter{local: remote, remote: remote, batch: time.Now()}
			buf := make([]byte, 0, dns.MaxMsgSize)
			b.ReportAllocs()
			for b.Loop() {
				w.reply, w.buf, w.outcome = nil, buf[:0], ""
				s.serveMsg(w, raw)
				if w.reply == nil {
					b.Fatal("no reply")
				}
			}
		})
	}
}

// BenchmarkServeUDPManyNames answers questions for names drawn at random
// from a zone of 2,000 and of 200,000 names, 4 A records each, writing
// each reply over its query through the loop's call (its recover
// included), and evicts the caches every 64 queries, untimed, as the
// kernel's receive and send paths do between two of the loop's batches:
// what a lookup in the wire-name index costs when its memory is not in
// cache.
func BenchmarkServeUDPManyNames(b *testing.B) {
	evict := make([]byte, 8<<20)
	for _, n := range []int{2000, 200000} {
		var zf strings.Builder
		zf.WriteString("$ORIGIN bench.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 198.18.0.2\n")
		for i := range n {
			for j := range 4 {
				a := i*4 + j
				fmt.Fprintf(&zf, "n%d A 198.19.%d.%d\n", i, a>>8&255, a&255)
			}
		}
		path := filepath.Join(b.TempDir(), "bench.test.zone")
		if err := os.WriteFile(path, []byte(zf.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		z, err := zone.Load("bench.test.", path)
		if err != nil {
			b.Fatal(err)
		}
		s := New(Options{}, &View{Zones: zone.NewZones(z)})
		u := &udpServer{s: s}
		r := rand.New(rand.NewPCG(1, 2))
		qs := make([][]byte, 4096)
		for i := range qs {
			raw, err := query(fmt.Sprintf("n%d.bench.test.", r.IntN(n)), dns.TypeA).Pack()
			if err != nil {
				b.Fatal(err)
			}
			qs[i] = raw
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			remote := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.10:5300"))
			w := &replyWriter{local: remote, remote: remote, batch: time.Now(), inPlace: true}
			buf := make([]byte, dns.MaxMsgSize)
			i := 0
			for b.Loop() {
				if i%64 == 0 {
					b.StopTimer()
					for k := 0; k < len(evict); k += 64 {
						evict[k]++
					}
					b.StartTimer()
				}
				q := qs[i%len(qs)]
				i++
				w.reply, w.outcome = nil, ""
				u.serveDatagram(w, buf[:copy(buf, q)])
				if w.reply == nil {
					b.Fatal("no reply")
				}
			}
		})
	}
}
