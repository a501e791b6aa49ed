package fallback

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/zone"
)

// FuzzServeUDP feeds datagrams through the UDP path a real socket's
// datagrams take: the screen, the parse and the handler, over the example
// zone with its dynamic sets and a signed zone. A datagram either gets no
// reply (shorter than a header, or a response) or a reply that unpacks,
// carries the query's ID with QR set, and fits the client's size: 512
// bytes without EDNS, else what its OPT advertises, at least 512. Over TCP
// the same query, when it unpacks, gets a reply that packs.
func FuzzServeUDP(f *testing.F) {
	v, _ := exampleView(f)
	signed := signedZone(f, "signed.test.", "$TTL 3600\n@ SOA ns1 hostmaster 1 7200 900 1209600 300\n@ NS ns1\nns1 A 198.18.0.53\nwww A 198.18.1.1\nbig TXT \"a long text record that takes some room in a reply, to push it over 512\" \"and more of it, to push it over 512 bytes with a signature beside it\"\n")
	ex := v.Zones.Find("example.test.")
	v.Zones = zone.NewZones(ex, signed)
	s := New(Options{ID: "fuzz", Version: "steadydns fuzz"}, v)
	for _, m := range []*dns.Msg{
		query("static.example.test.", dns.TypeA),
		withEDNS(query("WeB.ExAmPlE.tEsT.", dns.TypeA), 1232, true),
		withEDNS(query("web6.example.test.", dns.TypeAAAA), 4096, false),
		withEDNS(query("big.example.test.", dns.TypeA), 512, false),
		query("big.example.test.", dns.TypeA),
		withEDNS(query("big.signed.test.", dns.TypeTXT), 1232, true),
		withEDNS(query("nothere.signed.test.", dns.TypeA), 1232, true),
		query("alias.example.test.", dns.TypeA),
		query("x.y.wild.example.test.", dns.TypeA),
		query("host.dn.example.test.", dns.TypeA),
		query("ns.sub.example.test.", dns.TypeA),
		query("example.test.", dns.TypeANY),
		query("example.test.", dns.TypeAXFR),
		query("down.example.test.", dns.TypeA),
		query("fail.example.test.", dns.TypeA),
		withOptions(withEDNS(query("geo.example.test.", dns.TypeA), 1232, false)),
		flags(query("id.server.", dns.TypeTXT)),
	} {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	b, err := chaos.Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(hdr(7, 0x28, 0, 1, 0, 0)) // UPDATE with no question
	f.Add(hdr(8, 0x01, 0, 0, 0, 1)) // RD, an additional counted and missing
	f.Fuzz(func(t *testing.T, b []byte) {
		w := &replyWriter{local: &net.UDPAddr{IP: net.IPv4(198, 18, 0, 2), Port: 53}, remote: &net.UDPAddr{IP: net.IPv4(198, 18, 0, 1), Port: 40000}}
		s.serveUDP(w, b)
		if w.reply == nil {
			if len(b) >= headerLen && b[2]&0x80 == 0 {
				t.Fatalf("no reply to a query of %d bytes: %x", len(b), b)
			}
			return
		}
		var r dns.Msg
		if err := r.Unpack(w.reply); err != nil {
			t.Fatalf("reply does not unpack: %v\nquery %x\nreply %x", err, b, w.reply)
		}
		if r.Id != binary.BigEndian.Uint16(b) || !r.Response {
			t.Fatalf("reply id %#04x response %v to query id %#04x", r.Id, r.Response, binary.BigEndian.Uint16(b))
		}
		limit := dns.MinMsgSize
		var q dns.Msg
		if parse(b, &q) == nil {
			if opt, ok := queryOPT(&q); ok && opt != nil {
				limit = max(limit, int(opt.UDPSize()))
			}
			tw := &tcpRecorder{}
			s.Handler().ServeDNS(tw, &q)
			if tw.msg == nil {
				t.Fatal("no reply over TCP")
			}
			if _, err := tw.msg.Pack(); err != nil {
				t.Fatalf("reply over TCP does not pack: %v", err)
			}
		}
		if len(w.reply) > limit {
			t.Fatalf("reply of %d bytes to a client whose size is %d\nquery %x", len(w.reply), limit, b)
		}
	})
}

// tcpRecorder is a dns.ResponseWriter of a TCP connection that keeps the
// reply.
type tcpRecorder struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (r *tcpRecorder) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(198, 18, 0, 1), Port: 40000}
}
func (r *tcpRecorder) WriteMsg(m *dns.Msg) error { r.msg = m; return nil }

// TestOptionsNotImplemented: an option steadydns does not implement is
// ignored even when miekg/dns would refuse its content (here an LLQ of 8
// bytes, FuzzXDP's finding), as XDP ignores it; a malformed ECS, the one
// option implemented, gets FORMERR, and XDP passes it.
func TestOptionsNotImplemented(t *testing.T) {
	v, _ := exampleView(t)
	s := New(Options{}, v)
	q := withEDNS(query("static.example.test.", dns.TypeA), 1232, false)
	for _, c := range []struct {
		name  string
		opt   dns.EDNS0
		rcode int
	}{
		{"short llq", &dns.EDNS0_LOCAL{Code: dns.EDNS0LLQ, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}, dns.RcodeSuccess},
		{"short expire", &dns.EDNS0_LOCAL{Code: dns.EDNS0EXPIRE, Data: []byte{1, 2}}, dns.RcodeSuccess},
		{"ecs of family 3", &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 3, 0, 0}}, dns.RcodeFormatError},
		{"ecs /33", &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 33, 0, 198, 18, 0, 1}}, dns.RcodeFormatError},
	} {
		t.Run(c.name, func(t *testing.T) {
			q.IsEdns0().Option = []dns.EDNS0{c.opt, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}
			b, err := q.Pack()
			if err != nil {
				t.Fatal(err)
			}
			var r dns.Msg
			if err := r.Unpack(s.AnswerDatagram(b, netip.MustParseAddrPort("198.18.0.1:40000"))); err != nil {
				t.Fatal(err)
			}
			if r.Rcode != c.rcode || (c.rcode == dns.RcodeSuccess) != (len(r.Answer) == 2) {
				t.Errorf("rcode %s with %d answers, want %s", dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[c.rcode])
			}
		})
	}
}
