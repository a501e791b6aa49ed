package fallback

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
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
	signed := signedZone(t, "signed.test.", "$TTL 3600\n@ SOA ns1 hostmaster 1 7200 900 1209600 300\n@ NS ns1\nns1 A 198.18.0.53\nwww A 198.18.1.1\nwww AAAA fd53::1\n")
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

var fastClient = net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.10:5300"))

// bothPaths answers b as a UDP socket does, the fast path first, and with
// the handler alone, from the same server, and fails unless both send the
// same bytes, report the same qtype and outcomes, and put the same replies
// to the rate limiter. It reports whether the fast path answered.
func bothPaths(t *testing.T, s *Server, rec *pathRecord, b []byte) bool {
	t.Helper()
	verdict := rec.verdict
	*rec = pathRecord{verdict: verdict}
	probe := &udpWriter{remote: fastClient}
	_, fast := s.answerFast(probe, b)

	*rec = pathRecord{verdict: verdict}
	w := &udpWriter{remote: fastClient, buf: make([]byte, 0, replyBuf)}
	qtype := s.serveMsg(w, b)
	got := *rec
	if w.scratch.pre.v != nil {
		t.Fatalf("a selection left over after the query %x", b)
	}

	*rec = pathRecord{verdict: verdict}
	ref := &udpWriter{remote: fastClient, buf: make([]byte, 0, replyBuf)}
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
	return fast
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
// options, ECS), in mixed case, with every rate-limit verdict and NSID on
// and off, the reply a UDP socket sends, the outcome observed and the
// reply limited are those of the handler alone, byte for byte; and the
// fast path answers the common queries itself.
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
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := s.answerFast(&udpWriter{remote: fastClient}, c.b); ok {
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
		query("many.example.test.", dns.TypeAAAA),
		query("down.example.test.", dns.TypeA),
		query("fail.example.test.", dns.TypeA),
		withEDNS(query("www.signed.test.", dns.TypeAAAA), 1232, true),
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
