package bpf_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

var (
	label63 = strings.Repeat("a", 63)
	// 3 labels of 63 bytes and one of 61: 3*64 + 62 + 1 = 255 wire bytes.
	name255 = label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61) + "."
)

// fixtures fills the maps with the record sets the table tests query.
func fixtures(t *testing.T, o *loader.Objects) {
	put(t, o, "www.example.test.", dns.TypeA, rrset(30, 8, cand{addr: "198.18.1.1", check: 1}, cand{addr: "198.18.1.2", check: 2}, cand{addr: "198.18.1.3", check: 3}))
	put(t, o, "www.example.test.", dns.TypeAAAA, rrset(30, 8, cand{addr: "fd53:1::1", check: 1}, cand{addr: "fd53:1::2", check: 2}))
	put(t, o, "test.", dns.TypeA, rrset(300, 8, cand{addr: "198.18.2.1"}))
	put(t, o, label63+".example.test.", dns.TypeA, rrset(300, 8, cand{addr: "198.18.2.63"}))
	put(t, o, name255, dns.TypeAAAA, rrset(300, 8, cand{addr: "fd53:2::255"}))
	setHealth(t, o, 1, 2, 3)
}

// expected builds the reply XDP must send, with miekg/dns: QR and AA, ID,
// RD and CD copied, answers owned by the question name (0xC00C), and OPT
// with size 1232 and DO copied when the query had OPT.
func expected(t *testing.T, q []byte, ttl uint32, addrs ...string) []byte {
	t.Helper()
	in := new(dns.Msg)
	if err := in.Unpack(q); err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	r.Id = in.Id
	r.Response, r.Authoritative = true, true
	r.RecursionDesired, r.CheckingDisabled = in.RecursionDesired, in.CheckingDisabled
	r.Question = in.Question
	hdr := dns.RR_Header{Name: in.Question[0].Name, Rrtype: in.Question[0].Qtype, Class: dns.ClassINET, Ttl: ttl}
	for _, a := range addrs {
		if hdr.Rrtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{Hdr: hdr, A: net.ParseIP(a).To4()})
		} else {
			r.Answer = append(r.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.ParseIP(a)})
		}
	}
	if opt := in.IsEdns0(); opt != nil {
		r.SetEdns0(1232, opt.Do())
	}
	r.Compress = true
	b, err := r.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withOpt(size uint16, do bool, opts ...dns.EDNS0) func(*dns.Msg) {
	return func(m *dns.Msg) {
		m.SetEdns0(size, do)
		o := m.IsEdns0()
		o.Option = append(o.Option, opts...)
	}
}

func TestAnswers(t *testing.T) {
	o := load(t)
	fixtures(t, o)
	www := []string{"198.18.1.1", "198.18.1.2", "198.18.1.3"}
	www6 := []string{"fd53:1::1", "fd53:1::2"}
	cookie := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}
	cases := []struct {
		name   string
		v6     bool
		csum   packet.Checksum
		q      []byte
		ttl    uint32
		answer []string
	}{
		{"A over ipv4", false, packet.Full, query("www.example.test.", dns.TypeA, nil), 30, www},
		{"AAAA over ipv4", false, packet.Full, query("www.example.test.", dns.TypeAAAA, nil), 30, www6},
		{"A over ipv6", true, packet.Full, query("www.example.test.", dns.TypeA, nil), 30, www},
		{"AAAA over ipv6", true, packet.Full, query("www.example.test.", dns.TypeAAAA, nil), 30, www6},
		{"partial checksum ipv4", false, packet.Partial, query("www.example.test.", dns.TypeA, nil), 30, www},
		{"partial checksum ipv6", true, packet.Partial, query("www.example.test.", dns.TypeAAAA, nil), 30, www6},
		{"no checksum ipv4", false, packet.Zero, query("www.example.test.", dns.TypeA, nil), 30, www},
		{"opt 512 do=0", false, packet.Full, query("www.example.test.", dns.TypeA, withOpt(512, false)), 30, www},
		{"opt 1232 do=1", false, packet.Full, query("www.example.test.", dns.TypeA, withOpt(1232, true)), 30, www},
		{"opt 4096 do=1 ipv6", true, packet.Partial, query("www.example.test.", dns.TypeAAAA, withOpt(4096, true)), 30, www6},
		{"opt below 512", false, packet.Full, query("www.example.test.", dns.TypeA, withOpt(100, false)), 30, www},
		{"opt with cookie is not echoed", false, packet.Full, query("www.example.test.", dns.TypeA, withOpt(1232, false, cookie)), 30, www},
		{"opt with unknown option", true, packet.Full, query("www.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3}})), 30, www},
		{"mixed case keeps the question", false, packet.Full, query("WwW.ExAmPlE.TeSt.", dns.TypeA, nil), 30, www},
		{"cd and rd copied", false, packet.Full, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.CheckingDisabled = true }), 30, www},
		{"ad cleared", false, packet.Full, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.AuthenticatedData = true; m.RecursionDesired = false }), 30, www},
		{"one label", false, packet.Full, query("TEST.", dns.TypeA, nil), 300, []string{"198.18.2.1"}},
		{"63-byte label", true, packet.Full, query(strings.ToUpper(label63)+".example.test.", dns.TypeA, nil), 300, []string{"198.18.2.63"}},
		{"255-byte name", false, packet.Partial, query(name255, dns.TypeAAAA, withOpt(1232, true)), 300, []string{"fd53:2::255"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := frame(c.v6, c.q, c.csum)
			in := packet.Build(f)
			ret, out := run(t, o, in)
			r := checkAnswer(t, "", f, in, expected(t, c.q, c.ttl, c.answer...), ret, out)
			if r == nil {
				return
			}
			// The owner of every answer is a pointer to the question.
			var m dns.Msg
			if err := m.Unpack(r.Payload); err != nil {
				t.Fatalf("unpacking the reply: %v", err)
			}
			qend := 12 + len(wire(t, m.Question[0].Name)) + 4
			if len(c.answer) > 0 && !bytes.Equal(r.Payload[qend:qend+2], []byte{0xc0, 0x0c}) {
				t.Errorf("first answer owner %x, want c00c", r.Payload[qend:qend+2])
			}
			if !bytes.Equal(r.Payload[12:qend], c.q[12:qend]) {
				t.Errorf("question changed: %x, sent %x", r.Payload[12:qend], c.q[12:qend])
			}
		})
	}
}

// checkAnswer holds out, the program's reply (action ret) to the query
// frame f (in, its bytes), to the DNS reply want: XDP_TX, headers and
// checksums that parse, addresses and ports swapped, and want as the
// payload. It returns the parsed reply, or nil where it could not be
// parsed; what starts each error.
func checkAnswer(t *testing.T, what string, f packet.Frame, in, want []byte, ret uint32, out []byte) *packet.Reply {
	t.Helper()
	if ret != 3 /* XDP_TX */ {
		dumpf(t, what+"action %d, want XDP_TX", in, want, out, ret)
		return nil
	}
	r, err := packet.Parse(out)
	if err != nil {
		dumpf(t, what+"reply frame: %v", in, want, out, err)
		return nil
	}
	if r.Src != f.Dst || r.Dst != f.Src || r.SrcMAC != f.DstMAC || r.DstMAC != f.SrcMAC {
		t.Errorf("%sreply %v→%v (%x→%x), want %v→%v", what, r.Src, r.Dst, r.SrcMAC, r.DstMAC, f.Dst, f.Src)
	}
	if !bytes.Equal(r.Payload, want) {
		dumpf(t, what+"dns reply differs", in, want, r.Payload)
	}
	return r
}

// TestGrowthAtEitherEnd holds the reply to the same bytes whichever end of
// the frame grows: the program grows a frame at its tail when the answers
// fit the (-len) mod 64 bytes a buffer rounded up to a cache line leaves
// there, and at its head, moving the headers and question, when they do
// not. Ethernet padding after the datagram, which the program allows and
// the reply keeps, moves the frame's length through every remainder, so
// one answer (16 bytes) and two (56) take each end in turn.
func TestGrowthAtEitherEnd(t *testing.T) {
	o := load(t)
	fixtures(t, o)
	for _, c := range []struct {
		v6     bool
		q      []byte
		ttl    uint32
		answer []string
	}{
		{false, query("test.", dns.TypeA, nil), 300, []string{"198.18.2.1"}},
		{true, query("www.example.test.", dns.TypeAAAA, withOpt(1232, false)), 30, []string{"fd53:1::1", "fd53:1::2"}},
	} {
		want := expected(t, c.q, c.ttl, c.answer...)
		grown := len(want) - len(c.q)
		fits := map[bool]int{}
		for pad := range 64 {
			f := frame(c.v6, c.q, packet.Full)
			in := append(packet.Build(f), make([]byte, pad)...)
			ret, out := run(t, o, in)
			what := fmt.Sprintf("%d bytes of padding: ", pad)
			if checkAnswer(t, what, f, in, want, ret, out) != nil && len(out) != len(in)+grown {
				t.Errorf("%s%d bytes, want %d", what, len(out), len(in)+grown)
			}
			fits[grown <= -len(in)&63]++
		}
		// The paddings must give both ends their turn, or the test
		// checks one of them only.
		if fits[true] == 0 || fits[false] == 0 {
			t.Errorf("%d bytes of answers: %d frames had the room at the tail, %d not; want both", grown, fits[true], fits[false])
		}
	}
}

// rewrite packs a query and edits its bytes.
func rewrite(b []byte, edit func([]byte) []byte) []byte { return edit(append([]byte(nil), b...)) }

func TestPassed(t *testing.T) {
	o := load(t)
	fixtures(t, o)
	www := query("www.example.test.", dns.TypeA, nil)
	cases := []struct {
		name string
		in   []byte
	}{
		{"name not in the map", packet.Build(frame(false, query("nope.example.test.", dns.TypeA, nil), packet.Full))},
		{"type MX", packet.Build(frame(false, query("www.example.test.", dns.TypeMX, nil), packet.Full))},
		{"type ANY", packet.Build(frame(true, query("www.example.test.", dns.TypeANY, nil), packet.Full))},
		{"class CH", packet.Build(frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), packet.Full))},
		{"qdcount 2", packet.Build(frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), packet.Full))},
		{"qdcount 0", packet.Build(frame(false, rewrite(www, func(b []byte) []byte { b[5] = 0; return b[:12] }), packet.Full))},
		{"compression pointer in the question", packet.Build(frame(false, rewrite(www, func(b []byte) []byte {
			// "www" then a pointer back to offset 12.
			return append(b[:12], 3, 'w', 'w', 'w', 0xc0, 12, 0, 1, 0, 1)
		}), packet.Full))},
		{"edns version 1", packet.Build(frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), packet.Full))},
		{"opt option overruns", packet.Build(frame(false, rewrite(query("www.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3, 4}})), func(b []byte) []byte {
			b[len(b)-6]++ // option length 4 → 5, past the rdata
			return b
		}), packet.Full))},
		{"opt rdlength short", packet.Build(frame(false, rewrite(query("www.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3, 4}})), func(b []byte) []byte {
			b[len(b)-10]-- // rdlength 8 → 7
			return b
		}), packet.Full))},
		{"additional record not opt", packet.Build(frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) {
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "x.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(198, 18, 9, 9)})
		}), packet.Full))},
		{"trailing bytes", packet.Build(frame(false, append(append([]byte(nil), www...), 0, 0), packet.Full))},
		{"response bit", packet.Build(frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.Response = true }), packet.Full))},
		{"opcode notify", packet.Build(frame(false, query("www.example.test.", dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), packet.Full))},
		{"ancount 1", packet.Build(frame(false, rewrite(www, func(b []byte) []byte { b[7] = 1; return b }), packet.Full))},
		{"ipv4 options", packet.Build(func() packet.Frame {
			f := frame(false, www, packet.Full)
			f.IPv4Options = []byte{1, 1, 1, 0} // NOP NOP NOP EOL
			return f
		}())},
		{"ipv4 first fragment", packet.Build(func() packet.Frame { f := frame(false, www, packet.Full); f.IPv4Frag = 0x2000; return f }())},
		{"ipv4 later fragment", packet.Build(func() packet.Frame { f := frame(false, www, packet.Full); f.IPv4Frag = 0x0010; return f }())},
		{"ipv6 extension header", packet.Build(func() packet.Frame { f := frame(true, www, packet.Full); f.IPv6ExtHopByHop = true; return f }())},
		{"other destination", packet.Build(func() packet.Frame {
			f := frame(false, www, packet.Full)
			f.Dst = netip.AddrPortFrom(client4, 53)
			return f
		}())},
		{"other port", packet.Build(func() packet.Frame {
			f := frame(false, www, packet.Full)
			f.Dst = netip.AddrPortFrom(server4, 5353)
			return f
		}())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ret, out := run(t, o, c.in)
			if ret != 2 /* XDP_PASS */ || !bytes.Equal(out, c.in) {
				dumpf(t, "action %d, want XDP_PASS with the frame untouched", c.in, c.in, out, ret)
			}
		})
	}
}

// TestTruncatedQueries cuts a query at every length, both as a short frame
// whose headers claim more and as a well-formed datagram carrying a cut DNS
// message. Each must be passed untouched, never answered.
func TestTruncatedQueries(t *testing.T) {
	o := load(t)
	fixtures(t, o)
	for _, v6 := range []bool{false, true} {
		q := query("www.example.test.", dns.TypeA, withOpt(1232, true, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}))
		full := packet.Build(frame(v6, q, packet.Full))
		if ret, _ := run(t, o, full); ret != 3 {
			t.Fatalf("v6=%v: the whole query was not answered (action %d)", v6, ret)
		}
		for n := 14; n < len(full); n++ {
			in := append([]byte(nil), full[:n]...)
			if ret, out := run(t, o, in); ret != 2 || !bytes.Equal(out, in) {
				dumpf(t, "v6=%v frame cut at %d: action %d", in, in, out, v6, n, ret)
			}
		}
		for n := 0; n < len(q); n++ {
			in := packet.Build(frame(v6, q[:n], packet.Full))
			if ret, out := run(t, o, in); ret != 2 || !bytes.Equal(out, in) {
				dumpf(t, "v6=%v message cut at %d: action %d", in, in, out, v6, n, ret)
			}
		}
	}
}

// TestCounters checks that every packet's outcome is counted.
func TestCounters(t *testing.T) {
	o := load(t)
	fixtures(t, o)
	names, err := loader.OutcomeNames()
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	for _, n := range []string{"answered", "not_found", "qtype", "compression", "edns_version"} {
		if _, ok := index[n]; !ok {
			t.Fatalf("outcome %q missing from %v", n, names)
		}
	}
	before, err := o.Outcomes()
	if err != nil {
		t.Fatal(err)
	}
	run(t, o, packet.Build(frame(false, query("www.example.test.", dns.TypeA, nil), packet.Full)))
	run(t, o, packet.Build(frame(true, query("www.example.test.", dns.TypeA, nil), packet.Full)))
	run(t, o, packet.Build(frame(false, query("nope.example.test.", dns.TypeA, nil), packet.Full)))
	run(t, o, packet.Build(frame(false, query("www.example.test.", dns.TypeTXT, nil), packet.Full)))
	after, err := o.Outcomes()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"answered": 2, "not_found": 1, "qtype": 1, "compression": 0} {
		if got := after[index[name]] - before[index[name]]; got != want {
			t.Errorf("counter %s moved by %d, want %d", name, got, want)
		}
	}
}

// nameOfWire is a name whose wire form is n bytes long (n ≥ 2), root label
// included, made of labels of c.
func nameOfWire(n int, c string) string {
	var labels []string
	for rest := n - 1; rest > 0; {
		l := min(63, rest-1)
		if rest-(l+1) == 1 { // a lone byte cannot be a label
			l--
		}
		labels = append(labels, strings.Repeat(c, l))
		rest -= l + 1
	}
	return strings.Join(labels, ".") + "."
}

// TestNameLengths puts a name of every wire length from 3 to 255 bytes
// into the record table through the loader and queries it, in upper case,
// through the program. The loader hashes and places the name in Go, the
// program lowercases, hashes and compares it 8 bytes at a time in C; a
// name is answered only when both agree on every byte and every bit of the
// hash, at each length a word can end on.
func TestNameLengths(t *testing.T) {
	o := load(t)
	var lengths []int
	for n := 3; n <= int(bpf.SteadydnsLimitsNAME_MAX_WIRE); n++ {
		lengths = append(lengths, n)
	}
	want := map[loader.RecordKey]bool{}
	for i, n := range lengths {
		name := nameOfWire(n, "b")
		if got := len(wire(t, name)); got != n {
			t.Fatalf("name of %d wire bytes has %d", n, got)
		}
		addr := netip.AddrFrom4([4]byte{198, 18, 3 + byte(i>>8), byte(i)}).String()
		put(t, o, name, dns.TypeA, rrset(300, 8, cand{addr: addr}))
		want[loader.RecordKey{Wire: wire(t, name), Qtype: dns.TypeA}] = true

		q := query(strings.ToUpper(name), dns.TypeA, nil)
		in := packet.Build(frame(false, q, packet.Full))
		ret, out := run(t, o, in)
		exp := expected(t, q, 300, addr)
		if ret != 3 /* XDP_TX */ {
			dumpf(t, "%d-byte name: action %d, want XDP_TX", in, exp, out, n, ret)
			continue
		}
		r, err := packet.Parse(out)
		if err != nil {
			t.Fatalf("%d-byte name: reply frame: %v", n, err)
		}
		if !bytes.Equal(r.Payload, exp) {
			dumpf(t, "%d-byte name: dns reply differs", in, exp, r.Payload, n)
		}
	}
	// The keys read back are the keys written.
	keys, err := o.RecordKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !want[k] {
			t.Errorf("the table holds %q/%d, which was not put", k.Wire, k.Qtype)
		}
		delete(want, k)
	}
	for k := range want {
		t.Errorf("%d-byte name %q/%d put but not listed", len(k.Wire), k.Wire, k.Qtype)
	}
}
