package fallback

import (
	"bytes"
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

// pathRecord keeps what a server reports, for comparing two paths: every
// outcome, and every reply put to the rate limiter, which answers with
// verdict.
type pathRecord struct {
	outcomes []string
	limited  []Reply
	verdict  Verdict
}

func (r *pathRecord) Limit(_ netip.Addr, rp Reply) Verdict {
	r.limited = append(r.limited, rp)
	return r.verdict
}

// fastSets are the health-checked sets of the fast path's tests: the
// example's, and one too big for 512 bytes, which the handler truncates.
func fastSets() map[string]Selection {
	sets := map[string]Selection{}
	for k, v := range dynamicSets {
		sets[k] = v
	}
	var many []netip.Addr
	for i := range 40 {
		many = append(many, netip.AddrFrom16([16]byte{0xfd, 0x53, 15: byte(i + 1)}))
	}
	sets["many.example.test. AAAA"] = Selection{Action: Answer, TTL: 60, Addrs: many}
	sets[longDynamic+" A"] = Selection{Action: Answer, TTL: 7, Addrs: []netip.Addr{netip.MustParseAddr("198.18.9.9")}}
	sets["four.example.test. A"] = Selection{Action: Answer, TTL: 5, Addrs: []netip.Addr{
		netip.MustParseAddr("198.18.9.1"), netip.MustParseAddr("198.18.9.2"),
		netip.MustParseAddr("::ffff:198.18.9.3"), netip.MustParseAddr("198.18.9.4"),
	}}
	return sets
}

// fastServer is a server over the example zone, its dynamic sets and a
// signed zone, with NSID on or off, reporting into rec.
func fastServer(t testing.TB, nsid bool, rec *pathRecord) *Server {
	t.Helper()
	ex, err := zone.Load("example.test.", "testdata/example.test.zone")
	if err != nil {
		t.Fatal(err)
	}
	sets := fastSets()
	for key := range sets {
		name, typ, _ := strings.Cut(key, " ")
		if err := ex.MarkDynamic(name, dns.StringToType[typ]); err != nil {
			t.Fatal(err)
		}
	}
	signed := signedZone(t, "signed.test.", "$TTL 3600\n@ SOA ns1 hostmaster 1 7200 900 1209600 300\n@ NS ns1\nns1 A 198.18.0.53\nwww A 198.18.1.1\nwww AAAA fd53::1\n"+longStatic+" A 198.18.1.2\n")
	opts := Options{
		ID:      "fast",
		Observe: func(o string, _ time.Duration) { rec.outcomes = append(rec.outcomes, o) },
		RRL:     rec,
		Debug:   Debug{Name: "debug.example.test.", Explain: func(string) []string { return []string{"up"} }},
	}
	if nsid {
		opts.NSID = []byte("edge-1")
	}
	return New(opts, &View{Zones: zone.NewZones(ex, signed), Records: &fakeRecords{sets: sets}})
}

// The longest names there are, 255 bytes in wire form: a health-checked
// set of the example zone and a set of the signed zone's file.
var (
	longDynamic = longName(48) + "example.test."
	longStatic  = longName(49) + "signed.test."
)

// longName is three labels of 63 bytes and one of last, 241 bytes in wire
// form with last 48.
func longName(last int) string {
	l := strings.Repeat("x", 63) + "."
	return l + strings.ToUpper(l) + l + strings.Repeat("y", last) + "."
}

var (
	fastClient    = net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.10:5300"))
	fastTCPClient = net.TCPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.10:5300"))
)

// bothPaths answers b as a UDP socket does, the fast path first, and with
// the handler alone, from the same server, and fails unless both send the
// same bytes, report the same qtype and outcomes, and put the same replies
// to the rate limiter; then the same over TCP. It reports whether the fast
// path answered over UDP.
func bothPaths(t *testing.T, s *Server, rec *pathRecord, b []byte) bool {
	t.Helper()
	verdict := rec.verdict
	*rec = pathRecord{verdict: verdict}
	probe := &replyWriter{remote: fastClient}
	_, fast := s.answerFast(probe, b)

	*rec = pathRecord{verdict: verdict}
	w := &replyWriter{remote: fastClient, buf: make([]byte, 0, replyBuf)}
	qtype := s.serveMsg(w, b)
	got := *rec
	if w.scratch.pre.v != nil {
		t.Fatalf("a selection left over after the query %x", b)
	}

	// In place, as the loop answers: the reply over the query, in a
	// buffer with the loop's room.
	*rec = pathRecord{verdict: verdict}
	ib := append(make([]byte, 0, dns.MaxMsgSize), b...)
	iw := &replyWriter{remote: fastClient, buf: make([]byte, 0, replyBuf), inPlace: true}
	iqtype := s.serveMsg(iw, ib)
	inPlace := *rec

	// The fast path with an empty index: every question takes the
	// zone's lookup, which the index holds the answers of.
	*rec = pathRecord{verdict: verdict}
	sv := s.view.Load()
	s.view.Store(&served{v: sv.v})
	lw := &replyWriter{remote: fastClient, buf: make([]byte, 0, replyBuf)}
	lqtype := s.serveMsg(lw, b)
	s.view.Store(sv)
	looked := *rec

	*rec = pathRecord{verdict: verdict}
	ref := &replyWriter{remote: fastClient, buf: make([]byte, 0, replyBuf)}
	want := s.serveSlow(ref, b)

	if !bytes.Equal(w.reply, ref.reply) {
		var gm, wm dns.Msg
		gm.Unpack(w.reply)
		wm.Unpack(ref.reply)
		t.Fatalf("query %x (fast path answered: %v)\ngot  %x\n%v\nwant %x\n%v", b, fast, w.reply, &gm, ref.reply, &wm)
	}
	if qtype != want || fmt.Sprint(got.outcomes) != fmt.Sprint(rec.outcomes) || fmt.Sprint(got.limited) != fmt.Sprint(rec.limited) {
		t.Fatalf("query %x: got qtype %d, outcomes %v, limited %v; want %d, %v, %v", b, qtype, got.outcomes, got.limited, want, rec.outcomes, rec.limited)
	}
	if fast && len(iw.reply) > 0 && &iw.reply[0] != &ib[0] {
		t.Fatalf("query %x: the fast path's reply is not over the query", b)
	}
	if !bytes.Equal(iw.reply, ref.reply) || iqtype != want || fmt.Sprint(inPlace.outcomes) != fmt.Sprint(rec.outcomes) || fmt.Sprint(inPlace.limited) != fmt.Sprint(rec.limited) {
		t.Fatalf("query %x in place: got %x, qtype %d, outcomes %v, limited %v; want %x, %d, %v, %v", b, iw.reply, iqtype, inPlace.outcomes, inPlace.limited, ref.reply, want, rec.outcomes, rec.limited)
	}
	if !bytes.Equal(lw.reply, ref.reply) || lqtype != want || fmt.Sprint(looked.outcomes) != fmt.Sprint(rec.outcomes) || fmt.Sprint(looked.limited) != fmt.Sprint(rec.limited) {
		t.Fatalf("query %x without the index: got %x, qtype %d, outcomes %v, limited %v; want %x, %d, %v, %v", b, lw.reply, lqtype, looked.outcomes, looked.limited, ref.reply, want, rec.outcomes, rec.limited)
	}

	// Over TCP, as a connection answers: TCP's size limit, and nothing
	// put to the rate limiter.
	*rec = pathRecord{verdict: verdict}
	tw := &replyWriter{remote: fastTCPClient, buf: make([]byte, 0, replyBuf)}
	tqtype := s.serveMsg(tw, b)
	overTCP := *rec
	*rec = pathRecord{verdict: verdict}
	tref := &replyWriter{remote: fastTCPClient, buf: make([]byte, 0, replyBuf)}
	twant := s.serveSlow(tref, b)
	if !bytes.Equal(tw.reply, tref.reply) || tqtype != twant || fmt.Sprint(overTCP.outcomes) != fmt.Sprint(rec.outcomes) || len(overTCP.limited)+len(rec.limited) != 0 {
		t.Fatalf("query %x over TCP: got %x, qtype %d, outcomes %v, limited %v; want %x, %d, %v, none limited", b, tw.reply, tqtype, overTCP.outcomes, overTCP.limited, tref.reply, twant, rec.outcomes)
	}
	return fast
}

// withKeepalive adds the edns-tcp-keepalive option to m's OPT.
func withKeepalive(m *dns.Msg) *dns.Msg {
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
	return m
}

// mixCase spells name in a random mix of cases, as a resolver using 0x20
// does.
func mixCase(name string, rnd *rand.Rand) string {
	b := []byte(name)
	for i, c := range b {
		if 'a' <= c && c <= 'z' && rnd.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestFastEqualsSlow: for every name of the test zones, several types,
// with and without EDNS (sizes below, at and above 512, DO, NSID, ignored
// options, edns-tcp-keepalive, ECS), in mixed case, with every rate-limit
// verdict and NSID on and off, the reply a UDP socket or a TCP connection
// sends, the outcome observed and the reply limited are those of the
// handler alone, byte for byte; and the fast path answers the common
// queries itself.
func TestFastEqualsSlow(t *testing.T) {
	names := []string{
		"example.test.", "ns1.example.test.", "mail.example.test.", "static.example.test.",
		"alias.example.test.", "chain.example.test.", "to-web.example.test.", "_sip._udp.example.test.",
		"x.wild.example.test.", "a.b.ent.example.test.", "b.ent.example.test.", "sub.example.test.",
		"ns.sub.example.test.", "host.dn.example.test.", "host.in.example.test.", "big.example.test.",
		"bigtxt.example.test.", "nope.example.test.", "web.example.test.", "web6.example.test.",
		"down.example.test.", "fail.example.test.", "geo.example.test.", "many.example.test.",
		"four.example.test.", "web.debug.example.test.", "www.signed.test.", "nope.signed.test.",
		"signed.test.", "other.test.", "a-very-long-label-of-sixty-three-characters-to-make-names-long.web.example.test.",
		longDynamic, longStatic, "ns1.signed.test.", "ns1.sub.example.test.", "host.in.dn.example.test.",
	}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT}
	edns := []func(*dns.Msg){
		func(*dns.Msg) {},
		func(m *dns.Msg) { m.SetEdns0(1232, false) },
		func(m *dns.Msg) { m.SetEdns0(1232, true) },
		func(m *dns.Msg) { m.SetEdns0(100, false) },
		func(m *dns.Msg) { m.SetEdns0(512, true) },
		func(m *dns.Msg) { m.SetEdns0(4096, false) },
		func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
		},
		func(m *dns.Msg) { withOptions(withEDNS(m, 1232, true)) },
		func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(198, 18, 7, 0)}}
		},
		func(m *dns.Msg) { flags(m) },
		// edns-tcp-keepalive (answered over TCP): asked for, with a
		// TIMEOUT a client must not send, of a length that does not
		// unpack, and beside an option whose content does not.
		func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
		},
		func(m *dns.Msg) {
			m.SetEdns0(1232, true)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: 300}}
		},
		func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: dns.EDNS0TCPKEEPALIVE, Data: []byte{1}}, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
		},
		func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: dns.EDNS0EXPIRE, Data: []byte{1, 2, 3}}, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}}
		},
	}
	rnd := rand.New(rand.NewPCG(13, 5))
	answered := map[string]bool{}
	total, fast := 0, 0
	for _, nsid := range []bool{false, true} {
		rec := &pathRecord{}
		s := fastServer(t, nsid, rec)
		for _, verdict := range []Verdict{Send, Slip, Drop} {
			rec.verdict = verdict
			for _, name := range names {
				for _, qtype := range types {
					for i, e := range edns {
						for _, spelled := range []string{name, mixCase(name, rnd)} {
							m := query(spelled, qtype)
							m.Id = uint16(rnd.Uint32())
							e(m)
							b, err := m.Pack()
							if err != nil {
								t.Fatal(err)
							}
							total++
							if bothPaths(t, s, rec, b) {
								fast++
								answered[fmt.Sprintf("%s %s %d", strings.ToLower(spelled), dns.TypeToString[qtype], i)] = true
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d queries, %d answered by the fast path", total, fast)
	for _, want := range []string{
		"static.example.test. A 0", "static.example.test. A 2", "web.example.test. A 0",
		"web.example.test. A 6", "web6.example.test. AAAA 1", "fail.example.test. A 0",
		"four.example.test. A 7", "geo.example.test. A 9", "www.signed.test. AAAA 1",
		"x.wild.example.test. A 0", strings.ToLower(longDynamic) + " A 1", strings.ToLower(longStatic) + " A 0",
		"static.example.test. A 10", "web.example.test. A 11", "static.example.test. A 12", "web6.example.test. AAAA 13",
	} {
		if !answered[want] {
			t.Errorf("%s (name, type, EDNS case): not answered by the fast path", want)
		}
	}
	for _, declined := range []string{"big.example.test. A 0", "down.example.test. A 0", "many.example.test. AAAA 0", "geo.example.test. A 8", "alias.example.test. A 0", "www.signed.test. AAAA 2"} {
		if answered[declined] {
			t.Errorf("%s: answered by the fast path, which writes no SOA, CNAME, ECS, RRSIG or truncation", declined)
		}
	}
}

// TestFastDeclines: datagrams the fast path must leave to the handler, and
// the handler's replies to them through the UDP path.
func TestFastDeclines(t *testing.T) {
	rec := &pathRecord{}
	s := fastServer(t, true, rec)
	valid := pack(t, query("static.example.test.", dns.TypeA))
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"two questions", edit(func(b []byte) []byte { b[5] = 2; return append(b, b[12:]...) })},
		{"an answer counted", edit(func(b []byte) []byte { b[7] = 1; return b })},
		{"opcode notify", edit(func(b []byte) []byte { b[2] |= dns.OpcodeNotify << 3; return b })},
		{"trailing byte", append(bytes.Clone(valid), 0)},
		{"class CH", edit(func(b []byte) []byte { b[len(b)-1] = 3; return b })},
		{"a dot in a label", pack(t, query(`st\.atic.example.test.`, dns.TypeA))},
		{"compressed name", append(hdr(1, 0, 0, 1, 0, 0), 0xC0, 12, 0, 1, 0, 1)},
		{"cut question", valid[:len(valid)-1]},
		{"EDNS version 1", pack(t, func() *dns.Msg {
			m := withEDNS(query("static.example.test.", dns.TypeA), 1232, false)
			m.IsEdns0().SetVersion(1)
			return m
		}())},
		{"root", pack(t, query(".", dns.TypeA))},
		{"a name of 256 bytes", func() []byte {
			b := hdr(1, 0, 0, 1, 0, 0)
			for range 4 {
				b = append(append(b, 63), strings.Repeat("x", 63)...)
			}
			return append(b, 0, 0, 1, 0, 1)
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := s.answerFast(&replyWriter{remote: fastClient}, c.b); ok {
				t.Fatal("answered by the fast path")
			}
			bothPaths(t, s, rec, c.b)
		})
	}
}

// FuzzFastPath: for any datagram, a UDP socket's reply is the handler's
// alone, byte for byte, with the same outcomes and the same replies put to
// the rate limiter, whose verdict the datagram's ID picks; the fast path
// either declines or answers exactly so.
func FuzzFastPath(f *testing.F) {
	for _, m := range []*dns.Msg{
		query("static.example.test.", dns.TypeA),
		withEDNS(query("WeB.ExAmPlE.tEsT.", dns.TypeA), 1232, true),
		withEDNS(query("web6.example.test.", dns.TypeAAAA), 512, false),
		withOptions(withEDNS(query("four.example.test.", dns.TypeA), 4096, false)),
		withKeepalive(withEDNS(query("static.example.test.", dns.TypeA), 1232, false)),
		query("many.example.test.", dns.TypeAAAA),
		query("down.example.test.", dns.TypeA),
		query("fail.example.test.", dns.TypeA),
		withEDNS(query("www.signed.test.", dns.TypeAAAA), 1232, true),
		withEDNS(query("WwW.SiGnEd.TeSt.", dns.TypeA), 1232, false),
		query(longDynamic, dns.TypeA),
		withEDNS(query(longStatic, dns.TypeA), 1232, true),
		query("x.wild.example.test.", dns.TypeA),
		query("Ns.Sub.Example.Test.", dns.TypeA),
		query("web.debug.example.test.", dns.TypeA),
	} {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	rec := &pathRecord{}
	s := fastServer(f, true, rec)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < headerLen || b[2]&0x80 != 0 {
			return // dropped before either path
		}
		rec.verdict = Verdict(b[1] % 3)
		bothPaths(t, s, rec, b)
	})
}

// TestIndexHolds: the fast path's index holds the A and AAAA sets of the
// zone files and the health-checked sets, names of 255 bytes included, and
// a question in any case finds them; the questions whose answer takes
// more than a set (NODATA, CNAME chains, wildcards, referrals, DNAME,
// NXDOMAIN) and the debug names are left to the zone's lookup.
func TestIndexHolds(t *testing.T) {
	for _, name := range []string{longDynamic, longStatic} {
		if l := len(wireOf(t, name)); l != 255 {
			t.Fatalf("%s is %d bytes in wire form, not 255", name, l)
		}
	}
	s := fastServer(t, false, &pathRecord{})
	v := s.view.Load().v
	debug := New(Options{Debug: Debug{Name: "mail.example.test."}}, v)
	for _, c := range []struct {
		s     *Server
		name  string
		qtype uint16
		held  bool
	}{
		{s, "static.example.test.", dns.TypeA, true},
		{s, "StAtIc.ExAmPlE.tEsT.", dns.TypeA, true},
		{s, "mail.example.test.", dns.TypeAAAA, true},
		{s, "web.example.test.", dns.TypeA, true},
		{s, "WEB6.example.test.", dns.TypeAAAA, true},
		{s, "big.example.test.", dns.TypeA, true},
		{s, longDynamic, dns.TypeA, true},
		{s, longStatic, dns.TypeA, true},
		{s, "www.signed.test.", dns.TypeAAAA, true},
		{s, "static.example.test.", dns.TypeAAAA, false},
		{s, "web.example.test.", dns.TypeAAAA, false},
		{s, "alias.example.test.", dns.TypeA, false},
		{s, "x.wild.example.test.", dns.TypeA, false},
		{s, "ns.sub.example.test.", dns.TypeA, false},
		{s, "host.dn.example.test.", dns.TypeA, false},
		{s, "b.ent.example.test.", dns.TypeA, false},
		{s, "nope.example.test.", dns.TypeA, false},
		{debug, "mail.example.test.", dns.TypeA, false},
		{debug, "static.example.test.", dns.TypeA, true},
	} {
		b := pack(t, query(c.name, c.qtype))
		var k [maxKey]byte
		q, ok := parseFast(b, &k)
		if !ok {
			t.Fatalf("%s: not a query of the fast path", c.name)
		}
		if _, held := c.s.view.Load().idx.find(k[:q.keyLen]); held != c.held {
			t.Errorf("%s %s: in the index %v, want %v", c.name, dns.TypeToString[c.qtype], held, c.held)
		}
	}
}

func wireOf(t *testing.T, name string) []byte {
	t.Helper()
	buf := make([]byte, 512)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// TestFastAllocatesNothing: a loop's answer from the index, of a set of
// the zone file or a health-checked set, with or without EDNS and NSID,
// in any case, allocates nothing. An allocation per answer would be a
// sizeable share of the fast path's time (BenchmarkServeUDP), and more in
// the collector's work.
func TestFastAllocatesNothing(t *testing.T) {
	v, _ := exampleView(t)
	v.Records = oneSet{dynamicSets["web.example.test. A"]}
	s := New(Options{NSID: []byte("edge-1")}, v)
	for _, m := range []*dns.Msg{
		query("static.example.test.", dns.TypeA),
		query("StAtIc.ExAmPlE.TeSt.", dns.TypeA),
		withEDNS(query("mail.example.test.", dns.TypeAAAA), 1232, true),
		query("web.example.test.", dns.TypeA),
		func() *dns.Msg {
			m := withEDNS(query("WEB.example.test.", dns.TypeA), 1232, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
			return m
		}(),
	} {
		b := pack(t, m)
		for _, inPlace := range []bool{false, true} {
			w := &replyWriter{remote: fastClient, buf: make([]byte, 0, replyBuf), batch: time.Now(), inPlace: inPlace}
			ib := make([]byte, len(b), dns.MaxMsgSize)
			allocs := testing.AllocsPerRun(100, func() {
				w.reply, w.buf, w.outcome = nil, w.buf[:0], ""
				copy(ib, b)
				if _, ok := s.answerFast(w, ib); !ok {
					t.Fatalf("%s: declined", m.Question[0].Name)
				}
			})
			if allocs != 0 {
				t.Errorf("%s %s, in place %v: %.1f allocations per answer, want 0", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], inPlace, allocs)
			}
		}
	}
}

// TestSetPrepared: a view prepared for the server's debug name is served
// as indexed, not indexed again; one prepared for another debug name is
// indexed again, so the server's debug names stay out of its index.
func TestSetPrepared(t *testing.T) {
	v := fastServer(t, false, &pathRecord{}).view.Load().v
	p := Prepare(v, "")
	plain := New(Options{}, nil)
	plain.SetPrepared(p)
	debug := New(Options{Debug: Debug{Name: "mail.example.test."}}, nil)
	debug.SetPrepared(p)
	if plain.view.Load() != p.sv {
		t.Error("the server indexed a view prepared for its debug name again")
	}
	for _, c := range []struct {
		s    *Server
		name string
		held bool
	}{
		{plain, "mail.example.test.", true},
		{plain, "static.example.test.", true},
		{debug, "mail.example.test.", false},
		{debug, "static.example.test.", true},
	} {
		b := pack(t, query(c.name, dns.TypeA))
		var k [maxKey]byte
		q, ok := parseFast(b, &k)
		if !ok {
			t.Fatalf("%s: not a query of the fast path", c.name)
		}
		if _, held := c.s.view.Load().idx.find(k[:q.keyLen]); held != c.held {
			t.Errorf("%s A: in the index %v, want %v", c.name, held, c.held)
		}
	}
}

// TestIndexBlocks answers from an index of several blocks as the zone's
// lookup does, and leaves a set larger than a block to the lookup.
func TestIndexBlocks(t *testing.T) {
	var b strings.Builder
	b.WriteString("$TTL 300\n@ SOA ns1 hostmaster 1 7200 900 1209600 300\n@ NS ns1\nns1 A 198.18.0.53\n")
	const names, big = 40000, 37500 // a set of 37,500 AAAA records is 1,050,000 bytes of answers
	for i := range names {
		fmt.Fprintf(&b, "n%d A 198.18.%d.%d\nn%d A 198.18.%d.%d\nn%d AAAA fd53::%x\n", i, i>>8&0xff, i&0xff, i, i>>8&0xff, i&0xff^1, i, i)
	}
	for i := range big {
		fmt.Fprintf(&b, "big AAAA fd53::1:%x\n", i)
	}
	path := filepath.Join(t.TempDir(), "blocks.test.zone")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := zone.Load("blocks.test.", path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &pathRecord{}
	s := New(Options{ID: "blocks", RRL: rec}, &View{Zones: zone.NewZones(z)})
	if n := len(s.view.Load().idx.blocks); n < 3 {
		t.Fatalf("%d blocks, want several", n)
	}
	for i := 0; i < names; i += 997 {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			if !bothPaths(t, s, rec, pack(t, query(fmt.Sprintf("n%d.blocks.test.", i), qt))) {
				t.Errorf("n%d %s: not answered from the index", i, dns.TypeToString[qt])
			}
		}
	}
	if bothPaths(t, s, rec, pack(t, query("big.blocks.test.", dns.TypeAAAA))) {
		t.Errorf("the set of %d records was answered from the index", big)
	}
}
