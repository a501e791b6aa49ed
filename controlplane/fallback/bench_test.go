package fallback

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
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
			w := &udpWriter{local: remote, remote: remote, batch: time.Now()}
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
