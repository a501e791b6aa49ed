package prober

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steadydns/steadydns/testenv"
)

// These tests probe real backends in network namespaces from the edge
// host, the way a prober on an edge reaches its fleet.

func TestBackendsInTestenv(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	edge := Netns(env.Edge.Do)
	b1, b2 := env.Backends[0], env.Backends[1]
	for _, b := range env.Backends {
		serveHTTP(t, b.Do, netip.AddrPortFrom(b.V4, 80).String(), nil)
		serveHTTP(t, b.Do, netip.AddrPortFrom(b.V6, 80).String(), nil)
		go serveEcho(listenUDP(t, b.Do, netip.AddrPortFrom(b.V4, 7).String()))
	}
	serveDNS(t, b1.Do, netip.AddrPortFrom(b1.V4, 53).String())

	t.Run("http", func(t *testing.T) {
		for _, addr := range []netip.Addr{b1.V4, b1.V6} {
			ap := netip.AddrPortFrom(addr, 80)
			expect(t, runCheck(t, edge, checkOf(HTTP, ap, func(c *Spec) { c.Path = "/ok"; c.ExpectBody = "ok" })), true, ReasonOK, "")
			expect(t, runCheck(t, edge, checkOf(HTTP, ap, func(c *Spec) { c.Path = "/down" })), false, ReasonStatus, "status 503")
		}
	})
	t.Run("udp", func(t *testing.T) {
		c := checkOf(UDP, netip.AddrPortFrom(b1.V4, 7), func(c *Spec) { c.Payload, c.ExpectReply = "ping", "echo: ping" })
		expect(t, runCheck(t, edge, c), true, ReasonOK, "")
	})
	t.Run("icmp", func(t *testing.T) {
		for _, addr := range []netip.Addr{b1.V4, b1.V6} {
			expect(t, runCheck(t, edge, checkOf(ICMP, netip.AddrPortFrom(addr, 0))), true, ReasonOK, "")
		}
	})
	t.Run("icmp to an address nobody has", func(t *testing.T) {
		r := runCheck(t, edge, checkOf(ICMP, netip.MustParseAddrPort("198.18.1.200:0")))
		if r.Healthy || r.Reason != ReasonTimeout && r.Reason != ReasonUnreachable {
			t.Errorf("got healthy=%v reason=%s, want timeout or unreachable", r.Healthy, r.Reason)
		}
	})
	t.Run("dns", func(t *testing.T) {
		ap := netip.AddrPortFrom(b1.V4, 53)
		q := func(name string, qtype uint16, rcode int, answer string) Spec {
			return checkOf(DNS, ap, func(c *Spec) {
				c.QName, c.QType, c.ExpectRcode, c.ExpectAnswer = name, qtype, rcode, answer
			})
		}
		for _, tc := range []struct {
			name    string
			c       Spec
			healthy bool
			reason  Reason
			detail  string
		}{
			{"answer", q("www.example.test.", dns.TypeA, dns.RcodeSuccess, "198.18.1.1"), true, ReasonOK, ""},
			{"any answer", q("www.example.test.", dns.TypeA, dns.RcodeSuccess, ""), true, ReasonOK, ""},
			{"wrong answer", q("www.example.test.", dns.TypeA, dns.RcodeSuccess, "198.18.1.9"), false, ReasonAnswerMismatch, "answer mismatch"},
			{"no answer at all", q("www.example.test.", dns.TypeAAAA, dns.RcodeSuccess, "fd53"), false, ReasonAnswerMismatch, "answer mismatch"},
			{"wrong rcode", q("nope.example.test.", dns.TypeA, dns.RcodeSuccess, ""), false, ReasonRcode, "rcode NXDOMAIN"},
			{"expected NXDOMAIN", q("nope.example.test.", dns.TypeA, dns.RcodeNameError, ""), true, ReasonOK, ""},
			{"truncated, retried over tcp", q("big.example.test.", dns.TypeTXT, dns.RcodeSuccess, "end of the record"), true, ReasonOK, ""},
		} {
			t.Run(tc.name, func(t *testing.T) { expect(t, runCheck(t, edge, tc.c), tc.healthy, tc.reason, tc.detail) })
		}
	})

	// Backend 2 goes down last: its link stays down.
	b2tcp := checkOf(TCP, netip.AddrPortFrom(b2.V4, 80))
	b2icmp := []Spec{checkOf(ICMP, netip.AddrPortFrom(b2.V4, 0)), checkOf(ICMP, netip.AddrPortFrom(b2.V6, 0))}
	t.Run("up before the link goes down", func(t *testing.T) {
		expect(t, runCheck(t, edge, b2tcp), true, ReasonOK, "")
		for _, c := range b2icmp {
			expect(t, runCheck(t, edge, c), true, ReasonOK, "")
		}
	})
	if err := b2.SetLink(false); err != nil {
		t.Fatal(err)
	}
	t.Run("link down", func(t *testing.T) {
		for _, c := range append([]Spec{b2tcp}, b2icmp...) {
			start := time.Now()
			r := runCheck(t, edge, c)
			if r.Healthy || r.Reason != ReasonTimeout && r.Reason != ReasonUnreachable {
				t.Errorf("%s %s: got healthy=%v reason=%s (%s), want timeout or unreachable", c.Type, c.Target, r.Healthy, r.Reason, r.Detail)
			}
			// Twice the timeout: a check that spent it twice over, not
			// a loaded machine's delay.
			if took := time.Since(start); took >= 2*c.Timeout {
				t.Errorf("%s %s took %s, timeout is %s", c.Type, c.Target, took, c.Timeout)
			}
		}
	})
}

// serveDNS answers www.example.test A with 198.18.1.1, big.example.test TXT
// with more than fits in 512 bytes, and NXDOMAIN for anything else.
func serveDNS(t *testing.T, ns Netns, addr string) {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg).SetReply(q)
		m.Authoritative = true
		switch qn := q.Question[0]; {
		case qn.Name == "www.example.test." && qn.Qtype == dns.TypeA:
			rr, _ := dns.NewRR("www.example.test. 30 IN A 198.18.1.1")
			m.Answer = append(m.Answer, rr)
		case qn.Name == "www.example.test.":
		case qn.Name == "big.example.test." && qn.Qtype == dns.TypeTXT:
			for i := range 10 {
				m.Answer = append(m.Answer, &dns.TXT{
					Hdr: dns.RR_Header{Name: qn.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30},
					Txt: []string{strings.Repeat("filler", 10), map[bool]string{true: "end of the record"}[i == 9]},
				})
			}
			if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
				m.Truncate(dns.MinMsgSize)
			}
		default:
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})
	pc := listenUDP(t, ns, addr)
	ln := listenTCP(t, ns, addr)
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	t.Cleanup(func() { udp.Shutdown(); tcp.Shutdown() })
}
