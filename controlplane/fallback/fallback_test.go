package fallback

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steadydns/steadydns/controlplane/zone"
)

// fakeRecords stands in for the health-checked records, which live
// elsewhere. It remembers the last query it saw.
type fakeRecords struct {
	mu   sync.Mutex
	sets map[string]Selection // by "name TYPE"
	last Query
}

func (f *fakeRecords) Select(name string, qtype uint16, q Query, into []netip.Addr) (Selection, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = q
	sel, ok := f.sets[name+" "+dns.TypeToString[qtype]]
	sel.Addrs = append(into[:0], sel.Addrs...)
	return sel, ok
}

func (f *fakeRecords) lastQuery() Query {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

var dynamicSets = map[string]Selection{
	"web.example.test. A":     {Action: Answer, TTL: 30, Addrs: []netip.Addr{netip.MustParseAddr("198.18.1.2"), netip.MustParseAddr("198.18.1.1")}},
	"web6.example.test. AAAA": {Action: Answer, TTL: 30, Addrs: []netip.Addr{netip.MustParseAddr("fd53::1")}},
	"down.example.test. A":    {Action: NoData, TTL: 30},
	"fail.example.test. A":    {Action: ServFail, TTL: 30},
	"geo.example.test. A":     {Action: Answer, TTL: 30, Addrs: []netip.Addr{netip.MustParseAddr("198.18.7.1")}, ECSScope: 24},
	// Checked CNAME sets, as the selection answers them now.
	"cdn.example.test. CNAME":     {Action: Answer, TTL: 20, Target: "web.example.test."},
	"cnext.example.test. CNAME":   {Action: Answer, TTL: 20, Target: "cdn.example.test."},
	"cstatic.example.test. CNAME": {Action: Answer, TTL: 20, Target: "static.example.test."},
	"cgone.example.test. CNAME":   {Action: Answer, TTL: 20, Target: "nothere.example.test."},
	"cout.example.test. CNAME":    {Action: Answer, TTL: 20, Target: "www.other.test."},
	"cloop1.example.test. CNAME":  {Action: Answer, TTL: 20, Target: "cloop2.example.test."},
	"cloop2.example.test. CNAME":  {Action: Answer, TTL: 20, Target: "cloop1.example.test."},
	"cdown.example.test. CNAME":   {Action: NoData, TTL: 20},
	"cfail.example.test. CNAME":   {Action: ServFail, TTL: 20},
}

func exampleView(t testing.TB) (*View, *fakeRecords) {
	t.Helper()
	z, err := zone.Load("example.test.", "testdata/example.test.zone")
	if err != nil {
		t.Fatal(err)
	}
	for key := range dynamicSets {
		name, typ, _ := strings.Cut(key, " ")
		if err := z.MarkDynamic(name, dns.StringToType[typ]); err != nil {
			t.Fatal(err)
		}
	}
	recs := &fakeRecords{sets: dynamicSets}
	return &View{Zones: zone.NewZones(z), Records: recs}, recs
}

type testServer struct {
	s        *Server
	udp, tcp string
	outcomes chan string
	traffic  chan udpTraffic
}

// udpTraffic is one call of Options.UDP.
type udpTraffic struct {
	qtype   uint16
	in, out int
}

func start(t *testing.T, v *View) *testServer {
	t.Helper()
	return startWith(t, v, Options{})
}

// startWith starts a server with opts, its listen address and observers
// set by the test.
func startWith(t *testing.T, v *View, opts Options) *testServer {
	t.Helper()
	ts := &testServer{outcomes: make(chan string, 100), traffic: make(chan udpTraffic, 100)}
	opts.Listen = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}
	opts.Observe = func(o string, _ time.Duration) { ts.outcomes <- o }
	opts.UDP = func(qtype uint16, in, out int) {
		select {
		case ts.traffic <- udpTraffic{qtype, in, out}:
		default: // a test that does not read them
		}
	}
	ts.s = New(opts, v)
	if err := ts.s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ts.s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	addrs := ts.s.Addrs()
	ts.udp, ts.tcp = addrs[0].String(), addrs[1].String()
	if ts.udp != ts.tcp {
		t.Fatalf("udp on %s, tcp on %s: want one port", ts.udp, ts.tcp)
	}
	return ts
}

// exchange sends raw over network and returns the raw reply, or nil when
// none comes within a short wait.
func (ts *testServer) exchange(t *testing.T, network string, raw []byte) []byte {
	t.Helper()
	addr := ts.udp
	if network == "tcp" {
		addr = ts.tcp
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if network == "tcp" {
		raw = append(binary.BigEndian.AppendUint16(nil, uint16(len(raw))), raw...)
	}
	if _, err := c.Write(raw); err != nil {
		t.Fatal(err)
	}
	if network == "tcp" {
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return nil
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// outcome returns the next outcome observed.
func (ts *testServer) outcome(t *testing.T) string {
	t.Helper()
	select {
	case o := <-ts.outcomes:
		return o
	case <-time.After(2 * time.Second):
		t.Fatal("no outcome observed")
		return ""
	}
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func withEDNS(m *dns.Msg, size uint16, do bool) *dns.Msg {
	m.SetEdns0(size, do)
	return m
}

func pack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	raw, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// rrs renders records one a line, with single spaces.
func rrs(list []dns.RR) []string {
	var out []string
	for _, rr := range list {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, strings.Join(strings.Fields(rr.String()), " "))
		}
	}
	return out
}

const (
	soaNeg  = "example.test. 300 IN SOA ns1.example.test. hostmaster.example.test. 1 7200 900 1209600 300"
	staticA = "static.example.test. 3600 IN A 198.18.1.10|static.example.test. 3600 IN A 198.18.1.11"
)

// lines splits a "|"-separated list of records; "" is none.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "|")
}

func TestAnswers(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	tests := []struct {
		name              string
		q                 *dns.Msg
		rcode             int
		aa                bool
		answer, ns, extra string
		outcome           string
	}{
		{"soa", query("example.test.", dns.TypeSOA), dns.RcodeSuccess, true,
			"example.test. 3600 IN SOA ns1.example.test. hostmaster.example.test. 1 7200 900 1209600 300", "", "", OutcomeNoError},
		{"ns", query("example.test.", dns.TypeNS), dns.RcodeSuccess, true,
			"example.test. 3600 IN NS ns1.example.test.", "", "ns1.example.test. 3600 IN A 198.18.0.53", OutcomeNoError},
		{"mx with additional", query("example.test.", dns.TypeMX), dns.RcodeSuccess, true,
			"example.test. 3600 IN MX 10 mail.example.test.", "", "mail.example.test. 3600 IN A 198.18.0.25|mail.example.test. 3600 IN AAAA fd53::25", OutcomeNoError},
		{"txt", query("example.test.", dns.TypeTXT), dns.RcodeSuccess, true, `example.test. 3600 IN TXT "v=spf1 -all"`, "", "", OutcomeNoError},
		{"srv", query("_sip._udp.example.test.", dns.TypeSRV), dns.RcodeSuccess, true,
			"_sip._udp.example.test. 3600 IN SRV 10 5 5060 sip.example.test.", "", "sip.example.test. 3600 IN A 198.18.0.60", OutcomeNoError},
		{"static a", query("static.example.test.", dns.TypeA), dns.RcodeSuccess, true, staticA, "", "", OutcomeNoError},
		{"cname chain", query("alias.example.test.", dns.TypeA), dns.RcodeSuccess, true,
			"alias.example.test. 3600 IN CNAME chain.example.test.|chain.example.test. 3600 IN CNAME static.example.test.|" + staticA, "", "", OutcomeNoError},
		{"cname to dynamic", query("to-web.example.test.", dns.TypeA), dns.RcodeSuccess, true,
			"to-web.example.test. 3600 IN CNAME web.example.test.|web.example.test. 30 IN A 198.18.1.2|web.example.test. 30 IN A 198.18.1.1", "", "", OutcomeNoError},
		{"checked cname chased to its dynamic target", query("cdn.example.test.", dns.TypeA), dns.RcodeSuccess, true,
			"cdn.example.test. 20 IN CNAME web.example.test.|web.example.test. 30 IN A 198.18.1.2|web.example.test. 30 IN A 198.18.1.1", "", "", OutcomeNoError},
		{"checked cname asked for", query("cdn.example.test.", dns.TypeCNAME), dns.RcodeSuccess, true, "cdn.example.test. 20 IN CNAME web.example.test.", "", "", OutcomeNoError},
		{"checked cname, target without the type", query("cdn.example.test.", dns.TypeAAAA), dns.RcodeSuccess, true, "cdn.example.test. 20 IN CNAME web.example.test.", soaNeg, "", OutcomeNoData},
		{"checked cname to a checked cname", query("cnext.example.test.", dns.TypeA), dns.RcodeSuccess, true,
			"cnext.example.test. 20 IN CNAME cdn.example.test.|cdn.example.test. 20 IN CNAME web.example.test.|web.example.test. 30 IN A 198.18.1.2|web.example.test. 30 IN A 198.18.1.1", "", "", OutcomeNoError},
		{"checked cname to zone data", query("cstatic.example.test.", dns.TypeA), dns.RcodeSuccess, true, "cstatic.example.test. 20 IN CNAME static.example.test.|" + staticA, "", "", OutcomeNoError},
		{"checked cname for another type", query("cstatic.example.test.", dns.TypeMX), dns.RcodeSuccess, true, "cstatic.example.test. 20 IN CNAME static.example.test.", soaNeg, "", OutcomeNoData},
		{"checked cname to nxdomain", query("cgone.example.test.", dns.TypeA), dns.RcodeNameError, true, "cgone.example.test. 20 IN CNAME nothere.example.test.", soaNeg, "", OutcomeNXDomain},
		{"checked cname out of the zones", query("cout.example.test.", dns.TypeA), dns.RcodeSuccess, true, "cout.example.test. 20 IN CNAME www.other.test.", "", "", OutcomeNoError},
		{"checked cname loop", query("cloop1.example.test.", dns.TypeA), dns.RcodeSuccess, true,
			"cloop1.example.test. 20 IN CNAME cloop2.example.test.|cloop2.example.test. 20 IN CNAME cloop1.example.test.", "", "", OutcomeNoError},
		{"checked cname nodata", query("cdown.example.test.", dns.TypeA), dns.RcodeSuccess, true, "", soaNeg, "", OutcomeNoData},
		{"checked cname servfail", query("cfail.example.test.", dns.TypeA), dns.RcodeServerFailure, false, "", "", "", OutcomeServFail},
		{"dynamic aaaa", query("web6.example.test.", dns.TypeAAAA), dns.RcodeSuccess, true, "web6.example.test. 30 IN AAAA fd53::1", "", "", OutcomeNoError},
		{"dynamic nodata", query("down.example.test.", dns.TypeA), dns.RcodeSuccess, true, "", soaNeg, "", OutcomeNoData},
		{"dynamic servfail", query("fail.example.test.", dns.TypeA), dns.RcodeServerFailure, false, "", "", "", OutcomeServFail},
		{"nxdomain", query("nothere.example.test.", dns.TypeA), dns.RcodeNameError, true, "", soaNeg, "", OutcomeNXDomain},
		{"nodata", query("static.example.test.", dns.TypeMX), dns.RcodeSuccess, true, "", soaNeg, "", OutcomeNoData},
		{"nodata at a dynamic-only name", query("web.example.test.", dns.TypeMX), dns.RcodeSuccess, true, "", soaNeg, "", OutcomeNoData},
		{"wildcard", query("foo.wild.example.test.", dns.TypeA), dns.RcodeSuccess, true, "foo.wild.example.test. 3600 IN A 198.18.2.1", "", "", OutcomeNoError},
		{"empty non-terminal", query("b.ent.example.test.", dns.TypeA), dns.RcodeSuccess, true, "", soaNeg, "", OutcomeNoData},
		{"referral", query("www.sub.example.test.", dns.TypeA), dns.RcodeSuccess, false,
			"", "sub.example.test. 3600 IN NS ns.sub.example.test.", "ns.sub.example.test. 3600 IN A 198.18.4.1", OutcomeReferral},
		{"dname", query("host.dn.example.test.", dns.TypeA), dns.RcodeSuccess, true,
			"dn.example.test. 3600 IN DNAME in.example.test.|host.dn.example.test. 3600 IN CNAME host.in.example.test.|host.in.example.test. 3600 IN A 198.18.5.3", "", "", OutcomeNoError},
		{"any", query("static.example.test.", dns.TypeANY), dns.RcodeSuccess, true, `static.example.test. 3600 IN HINFO "RFC8482" ""`, "", "", OutcomeNoError},
		{"outside our zones", query("www.other.test.", dns.TypeA), dns.RcodeRefused, false, "", "", "", OutcomeRefused},
		{"axfr", query("example.test.", dns.TypeAXFR), dns.RcodeRefused, false, "", "", "", OutcomeRefused},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(network+"/"+tt.name, func(t *testing.T) {
				raw := ts.exchange(t, network, pack(t, tt.q))
				r := new(dns.Msg)
				if err := r.Unpack(raw); err != nil {
					t.Fatal(err)
				}
				if r.Rcode != tt.rcode || r.Authoritative != tt.aa {
					t.Errorf("rcode %s aa %v, want %s %v", dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tt.rcode], tt.aa)
				}
				if r.Id != tt.q.Id || !r.Response || !r.RecursionDesired || r.RecursionAvailable || r.Truncated {
					t.Errorf("header %+v", r.MsgHdr)
				}
				if len(r.Question) != 1 || r.Question[0] != tt.q.Question[0] {
					t.Errorf("question %v", r.Question)
				}
				for _, s := range []struct {
					name      string
					got, want []string
				}{{"answer", rrs(r.Answer), lines(tt.answer)}, {"authority", rrs(r.Ns), lines(tt.ns)}, {"additional", rrs(r.Extra), lines(tt.extra)}} {
					if !slices.Equal(s.got, s.want) {
						t.Errorf("%s:\n got %q\nwant %q", s.name, s.got, s.want)
					}
				}
				if o := ts.outcome(t); o != tt.outcome {
					t.Errorf("outcome %q, want %q", o, tt.outcome)
				}
			})
		}
	}
}

// xdpReply builds the reply the XDP program writes (docs/design.md, "What
// XDP answers"): the query's header and question, then answers owned by a pointer to the
// question, then an OPT when the query had one, with the NSID option
// when nsid is not empty.
func xdpReply(query []byte, qEnd int, qtype uint16, ttl uint32, addrs []netip.Addr, opt, do bool, nsid []byte) []byte {
	out := slices.Clone(query[:qEnd])
	out[2] = 0x84 | out[2]&0x01 // QR AA, RD kept
	out[3] &= 0x10              // CD kept
	binary.BigEndian.PutUint16(out[6:], uint16(len(addrs)))
	binary.BigEndian.PutUint16(out[8:], 0)
	binary.BigEndian.PutUint16(out[10:], 0)
	for _, a := range addrs {
		out = append(out, 0xC0, 0x0C)
		out = binary.BigEndian.AppendUint16(out, qtype)
		out = binary.BigEndian.AppendUint16(out, dns.ClassINET)
		out = binary.BigEndian.AppendUint32(out, ttl)
		out = binary.BigEndian.AppendUint16(out, uint16(a.BitLen()/8))
		out = append(out, a.AsSlice()...)
	}
	if opt {
		out[11] = 1
		flags := uint32(0)
		if do {
			flags = 0x8000
		}
		out = append(out, 0, 0, 41, 0x04, 0xD0)
		out = binary.BigEndian.AppendUint32(out, flags)
		if len(nsid) == 0 {
			return append(out, 0, 0)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(4+len(nsid)))
		out = append(out, 0, 3)
		out = binary.BigEndian.AppendUint16(out, uint16(len(nsid)))
		out = append(out, nsid...)
	}
	return out
}

func TestSameBytesAsXDP(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	static := []netip.Addr{netip.MustParseAddr("198.18.1.10"), netip.MustParseAddr("198.18.1.11")}
	web := dynamicSets["web.example.test. A"].Addrs
	tests := []struct {
		name  string
		q     *dns.Msg
		ttl   uint32
		addrs []netip.Addr
	}{
		{"static, 0x20", query("StAtIc.ExAmPlE.tEsT.", dns.TypeA), 3600, static},
		{"dynamic, 0x20", query("wEB.example.TEST.", dns.TypeA), 30, web},
		{"edns do, cookie and unknown option", withOptions(withEDNS(query("Web.Example.Test.", dns.TypeA), 4096, true)), 30, web},
		{"edns small size", withEDNS(query("web.example.test.", dns.TypeA), 100, false), 30, web},
		{"cd set, rd clear", flags(query("static.example.test.", dns.TypeA)), 3600, static},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := pack(t, tt.q)
			qEnd := 12 + len(tt.q.Question[0].Name) + 1 + 4
			opt := tt.q.IsEdns0()
			want := xdpReply(raw, qEnd, dns.TypeA, tt.ttl, tt.addrs, opt != nil, opt != nil && opt.Do(), nil)
			got := ts.exchange(t, "udp", raw)
			if !bytes.Equal(got, want) {
				t.Errorf("reply\n got %x\nwant %x", got, want)
			}
			ts.outcome(t)
		})
	}
}

func withOptions(m *dns.Msg) *dns.Msg {
	opt := m.IsEdns0()
	opt.Option = append(opt.Option,
		&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"},
		&dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3}})
	return m
}

func flags(m *dns.Msg) *dns.Msg {
	m.RecursionDesired = false
	m.CheckingDisabled = true
	m.AuthenticatedData = true
	return m
}

func TestErrors(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)

	twoQuestions := query("example.test.", dns.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, dns.Question{Name: "www.example.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	badvers := withEDNS(query("static.example.test.", dns.TypeA), 4096, true)
	badvers.IsEdns0().SetVersion(1)
	twoOPT := withEDNS(withEDNS(query("static.example.test.", dns.TypeA), 4096, false), 4096, false)
	garbage := []byte{0xBE, 0xEF, 0x01, 0x10, 0, 1, 0, 0, 0, 0, 0, 0, 0x3F, 'a', 'b'}
	cutQuestion := pack(t, query("static.example.test.", dns.TypeA))
	cutQuestion = cutQuestion[:len(cutQuestion)-3]
	missingRecord := pack(t, query("static.example.test.", dns.TypeA))
	missingRecord[11] = 1 // ARCOUNT 1, no record

	tests := []struct {
		name    string
		raw     []byte
		header  []byte // the reply's first 12 bytes
		rest    []byte // what follows the question, nil to skip the check
		outcome string
	}{
		{"two questions", pack(t, twoQuestions), hdr(twoQuestions.Id, 0x81, 0x01, 0, 0, 0), []byte{}, OutcomeFormErr},
		{"chaos class", pack(t, chaos), hdr(chaos.Id, 0x81, 0x05, 1, 0, 0), []byte{}, OutcomeRefused},
		{"badvers", pack(t, badvers), hdr(badvers.Id, 0x81, 0x00, 1, 0, 1),
			[]byte{0, 0, 41, 0x04, 0xD0, 1, 0, 0x80, 0, 0, 0}, OutcomeBadVers},
		{"two OPT", pack(t, twoOPT), hdr(twoOPT.Id, 0x81, 0x01, 1, 0, 0), []byte{}, OutcomeFormErr},
		{"garbage", garbage, hdr(0xBEEF, 0x81, 0x11, 0, 0, 0), []byte{}, OutcomeFormErr},
		{"question cut short", cutQuestion, hdr(binary.BigEndian.Uint16(cutQuestion), 0x81, 0x01, 0, 0, 0), []byte{}, OutcomeFormErr},
		{"fewer records than counted", missingRecord, hdr(binary.BigEndian.Uint16(missingRecord), 0x81, 0x01, 0, 0, 0), []byte{}, OutcomeFormErr},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(network+"/"+tt.name, func(t *testing.T) {
				got := ts.exchange(t, network, tt.raw)
				if len(got) < 12 || !bytes.Equal(got[:12], tt.header) {
					t.Fatalf("reply %x, want header %x", got, tt.header)
				}
				if tt.rest != nil {
					r := new(dns.Msg)
					if err := r.Unpack(got); err != nil {
						t.Fatal(err)
					}
					qEnd := 12
					if len(r.Question) == 1 {
						qEnd += len(r.Question[0].Name) + 1 + 4
					}
					if !bytes.Equal(got[qEnd:], tt.rest) {
						t.Errorf("after the question %x, want %x", got[qEnd:], tt.rest)
					}
				}
				if o := ts.outcome(t); o != tt.outcome {
					t.Errorf("outcome %q, want %q", o, tt.outcome)
				}
			})
		}
	}
}

// hdr builds a reply header with the given flag bytes and counts.
func hdr(id uint16, b2, b3 byte, qd, an, ar uint16) []byte {
	h := binary.BigEndian.AppendUint16(nil, id)
	h = append(h, b2, b3)
	h = binary.BigEndian.AppendUint16(h, qd)
	h = binary.BigEndian.AppendUint16(h, an)
	h = binary.BigEndian.AppendUint16(h, 0)
	return binary.BigEndian.AppendUint16(h, ar)
}

func TestNotImplemented(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	for _, opcode := range []int{dns.OpcodeUpdate, dns.OpcodeStatus, dns.OpcodeNotify} {
		for _, network := range []string{"udp", "tcp"} {
			q := withEDNS(query("example.test.", dns.TypeSOA), 4096, true)
			q.Opcode = opcode
			q.CheckingDisabled, q.AuthenticatedData, q.Truncated, q.Zero = true, true, true, true
			got := ts.exchange(t, network, pack(t, q))
			q.RecursionDesired, q.RecursionAvailable, q.Authoritative = true, true, true
			// QR and the opcode; RD, CD, AD, RA, AA, TC and Z all clear.
			want := hdr(q.Id, 0x80|byte(opcode)<<3, dns.RcodeNotImplemented, 1, 0, 1)
			if len(got) < 12 || !bytes.Equal(got[:12], want) {
				t.Fatalf("opcode %d over %s: reply %x, want header %x", opcode, network, got, want)
			}
			r := new(dns.Msg)
			if err := r.Unpack(got); err != nil {
				t.Fatal(err)
			}
			opt := r.IsEdns0()
			if r.Question[0] != q.Question[0] || opt == nil || opt.UDPSize() != 1232 || opt.Version() != 0 || !opt.Do() || len(opt.Option) != 0 {
				t.Errorf("opcode %d over %s: reply %v", opcode, network, r)
			}
			if o := ts.outcome(t); o != OutcomeNotImp {
				t.Errorf("outcome %q", o)
			}
		}
	}
}

func TestEDNS(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	for _, network := range []string{"udp", "tcp"} {
		for _, do := range []bool{false, true} {
			q := withOptions(withEDNS(query("example.test.", dns.TypeMX), 4096, do))
			r := new(dns.Msg)
			if err := r.Unpack(ts.exchange(t, network, pack(t, q))); err != nil {
				t.Fatal(err)
			}
			opt := r.IsEdns0()
			if opt == nil || r.Extra[len(r.Extra)-1] != opt {
				t.Fatalf("%s do=%v: no OPT last in %v", network, do, r.Extra)
			}
			if opt.UDPSize() != 1232 || opt.Version() != 0 || opt.Do() != do || len(opt.Option) != 0 || opt.Hdr.Ttl&0x7FFF != 0 {
				t.Errorf("%s do=%v: OPT %v", network, do, opt)
			}
			ts.outcome(t)
		}
	}
}

func TestECS(t *testing.T) {
	v, recs := exampleView(t)
	ts := start(t, v)
	for _, tt := range []struct {
		name  string
		scope uint8
	}{{"geo.example.test.", 24}, {"web.example.test.", 0}} {
		q := withEDNS(query(tt.name, dns.TypeA), 1232, false)
		ecs := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.51.100.0").To4()}
		q.IsEdns0().Option = []dns.EDNS0{ecs}
		r := new(dns.Msg)
		if err := r.Unpack(ts.exchange(t, "udp", pack(t, q))); err != nil {
			t.Fatal(err)
		}
		ts.outcome(t)
		got := recs.lastQuery()
		if got.ECS == nil || !got.ECS.Address.Equal(ecs.Address) || got.Client != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("%s: records saw %+v", tt.name, got)
		}
		opts := r.IsEdns0().Option
		if tt.scope == 0 {
			if len(opts) != 0 {
				t.Errorf("%s: options %v, want none", tt.name, opts)
			}
			continue
		}
		e, ok := opts[0].(*dns.EDNS0_SUBNET)
		if len(opts) != 1 || !ok || e.SourceScope != tt.scope || e.SourceNetmask != 24 || !e.Address.Equal(ecs.Address) {
			t.Errorf("%s: options %v, want ECS 198.51.100.0/24/%d", tt.name, opts, tt.scope)
		}
	}
}

func TestTruncation(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	tests := []struct {
		name    string
		q       *dns.Msg
		limit   int
		answers int
	}{
		{"30 A records without EDNS", query("big.example.test.", dns.TypeA), 512, 30},
		{"big TXT set, EDNS 4096", withEDNS(query("bigtxt.example.test.", dns.TypeTXT), 4096, false), 1232, 20},
		{"big TXT set, EDNS 600", withEDNS(query("bigtxt.example.test.", dns.TypeTXT), 600, false), 600, 20},
	}
	for _, tt := range tests {
		for _, network := range []string{"udp", "tcp"} {
			raw := ts.exchange(t, network, pack(t, tt.q))
			r := new(dns.Msg)
			if err := r.Unpack(raw); err != nil {
				t.Fatal(err)
			}
			outcome := ts.outcome(t)
			if network == "tcp" {
				if r.Truncated || len(r.Answer) != tt.answers || outcome != OutcomeNoError {
					t.Errorf("%s over tcp: tc %v, %d answers, outcome %s", tt.name, r.Truncated, len(r.Answer), outcome)
				}
				continue
			}
			if !r.Truncated || len(raw) > tt.limit || len(r.Answer) >= tt.answers || outcome != OutcomeTruncated {
				t.Errorf("%s over udp: tc %v, %d bytes, %d answers, outcome %s", tt.name, r.Truncated, len(raw), len(r.Answer), outcome)
			}
			if (tt.q.IsEdns0() != nil) != (r.IsEdns0() != nil) {
				t.Errorf("%s over udp: OPT lost", tt.name)
			}
		}
	}
}

func TestAdditionalDoesNotTruncate(t *testing.T) {
	// Without EDNS the MX reply fits only without its additional records:
	// they are optional, so TC stays clear (RFC 2181 §9).
	path := t.TempDir() + "/zone"
	text := "$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n"
	for i := range 12 {
		text += "@ MX 10 mail" + string(rune('a'+i)) + "\nmail" + string(rune('a'+i)) + " AAAA fd53::1\n"
	}
	writeFile(t, path, text)
	z, err := zone.Load("example.test.", path)
	if err != nil {
		t.Fatal(err)
	}
	ts := start(t, &View{Zones: zone.NewZones(z)})
	r := new(dns.Msg)
	if err := r.Unpack(ts.exchange(t, "udp", pack(t, query("example.test.", dns.TypeMX)))); err != nil {
		t.Fatal(err)
	}
	if r.Truncated || len(r.Answer) != 12 || len(r.Extra) == 12 {
		t.Errorf("tc %v, %d answers, %d additional", r.Truncated, len(r.Answer), len(r.Extra))
	}
	if o := ts.outcome(t); o != OutcomeNoError {
		t.Errorf("outcome %q", o)
	}
}

func TestDropsResponses(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	q := query("static.example.test.", dns.TypeA)
	q.Response = true
	for _, network := range []string{"udp", "tcp"} {
		if got := ts.exchange(t, network, pack(t, q)); got != nil {
			t.Errorf("%s: reply %x to a response", network, got)
		}
		if o := ts.outcome(t); o != OutcomeDropped {
			t.Errorf("%s: outcome %q", network, o)
		}
	}
	if got := ts.exchange(t, "udp", []byte{1, 2, 3}); got != nil {
		t.Errorf("reply %x to 3 bytes", got)
	}
	if o := ts.outcome(t); o != OutcomeDropped {
		t.Errorf("outcome %q", o)
	}
}

func TestSetView(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	raw := pack(t, query("static.example.test.", dns.TypeA))
	ts.s.SetView(&View{Zones: zone.NewZones()})
	r := new(dns.Msg)
	if err := r.Unpack(ts.exchange(t, "udp", raw)); err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeRefused || ts.outcome(t) != OutcomeRefused {
		t.Errorf("after swapping in an empty view: %v", r)
	}
	ts.s.SetView(v)
	if err := r.Unpack(ts.exchange(t, "udp", raw)); err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
		t.Errorf("after swapping back: %v", r)
	}
	ts.outcome(t)
}

// TestStartReportsBindError: a port held by a socket without
// SO_REUSEPORT, another program's, is an error naming the address.
func TestStartReportsBindError(t *testing.T) {
	v, _ := exampleView(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	held := pc.LocalAddr().String()
	s := New(Options{Listen: []netip.AddrPort{netip.MustParseAddrPort(held)}}, v)
	err = s.Start()
	if err == nil || !strings.HasPrefix(err.Error(), "listening on udp "+held+": ") {
		t.Errorf("error %v", err)
	}
}

// TestTwoServersShareThePort: a second server binds the port of a running
// one, UDP and TCP, as an upgrade does; both answer, and once the first
// stops the second answers everything, with no query lost between.
func TestTwoServersShareThePort(t *testing.T) {
	v, _ := exampleView(t)
	var answered [2]atomic.Uint64
	serve := func(i int, ap netip.AddrPort) *Server {
		s := New(Options{Listen: []netip.AddrPort{ap}, Observe: func(string, time.Duration) { answered[i].Add(1) }}, v)
		if err := s.Start(); err != nil {
			t.Fatalf("server %d on %s: %v", i+1, ap, err)
		}
		return s
	}
	first := serve(0, netip.MustParseAddrPort("127.0.0.1:0"))
	addr := first.Addrs()[0].String()
	second := serve(1, netip.MustParseAddrPort(addr))
	defer second.Shutdown(context.Background())
	if got := second.Addrs()[0].String(); got != addr {
		t.Fatalf("the second server bound %s, want %s", got, addr)
	}
	ask := func(proto string) error {
		c := &dns.Client{Net: proto, Timeout: time.Second}
		r, _, err := c.Exchange(query("static.example.test.", dns.TypeA), addr)
		if err == nil && (r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0) {
			err = fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		return err
	}
	// Many source ports: the kernel spreads them over both servers' sockets.
	for i := range 40 {
		for _, proto := range []string{"udp", "tcp"} {
			if err := ask(proto); err != nil {
				t.Fatalf("query %d over %s with both servers up: %v", i, proto, err)
			}
		}
	}
	if answered[0].Load() == 0 || answered[1].Load() == 0 {
		t.Errorf("the servers answered %d and %d of 80 queries: want both to take some", answered[0].Load(), answered[1].Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for _, proto := range []string{"udp", "tcp"} {
			if err := ask(proto); err != nil {
				t.Fatalf("query %d over %s after the first stopped: %v", i, proto, err)
			}
		}
	}
}

func TestHandler(t *testing.T) {
	v, _ := exampleView(t)
	w := &recorder{}
	New(Options{}, v).Handler().ServeDNS(w, query("static.example.test.", dns.TypeTXT))
	if w.msg == nil || w.msg.Rcode != dns.RcodeSuccess || !w.msg.Authoritative || len(w.msg.Ns) != 1 {
		t.Errorf("reply %v", w.msg)
	}
}

// recorder is a dns.ResponseWriter that keeps the reply.
type recorder struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (r *recorder) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(198, 18, 9, 9), Port: 5353}
}
func (r *recorder) WriteMsg(m *dns.Msg) error { r.msg = m; return nil }

func TestDSFromParent(t *testing.T) {
	v, _ := exampleView(t)
	path := t.TempDir() + "/child.zone"
	writeFile(t, path, "$TTL 60\n@ SOA ns.sub.example.test. h 7 2 3 4 5\n@ NS ns\nns A 198.18.4.1\nwww A 198.18.4.2\n")
	child, err := zone.Load("sub.example.test.", path)
	if err != nil {
		t.Fatal(err)
	}
	parent := v.Zones.Find("example.test.")
	ts := start(t, &View{Zones: zone.NewZones(parent, child)})
	for _, tt := range []struct {
		q      *dns.Msg
		answer int
		serial uint32 // of the SOA in authority, 0 for none
	}{
		{query("www.sub.example.test.", dns.TypeA), 1, 0},
		{query("sub.example.test.", dns.TypeDS), 0, 1}, // the parent's NODATA
		{query("sub.example.test.", dns.TypeMX), 0, 7}, // the child's
	} {
		r := new(dns.Msg)
		if err := r.Unpack(ts.exchange(t, "udp", pack(t, tt.q))); err != nil {
			t.Fatal(err)
		}
		ts.outcome(t)
		var serial uint32
		if len(r.Ns) == 1 {
			serial = r.Ns[0].(*dns.SOA).Serial
		}
		if !r.Authoritative || len(r.Answer) != tt.answer || serial != tt.serial {
			t.Errorf("%v: %v", tt.q.Question[0], r)
		}
	}
}

// TestUDPNeverAmplifiesPastTheClientsSize sends queries whose full replies
// are large, under every size a client may advertise: the UDP reply never
// exceeds the size (512 without EDNS or below 512, and at most 1232), a
// reply missing answers says so with TC, and TCP carries them all.
func TestUDPNeverAmplifiesPastTheClientsSize(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	sizes := []int{-1, 0, 100, 512, 600, 1000, 1232, 4096, 65535} // -1: no EDNS
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"big.example.test.", dns.TypeA},
		{"bigtxt.example.test.", dns.TypeTXT},
		{"bigtxt.example.test.", dns.TypeANY},
		{"big.example.test.", dns.TypeANY},
		{"example.test.", dns.TypeMX},
		{"nothere.example.test.", dns.TypeTXT},
	} {
		for _, size := range sizes {
			m := query(q.name, q.qtype)
			limit := 512
			if size >= 0 {
				m = withEDNS(m, uint16(size), true)
				limit = max(512, min(size, 1232))
			}
			raw := ts.exchange(t, "udp", pack(t, m))
			ts.outcome(t)
			full := new(dns.Msg)
			if err := full.Unpack(ts.exchange(t, "tcp", pack(t, m))); err != nil {
				t.Fatal(err)
			}
			ts.outcome(t)
			r := new(dns.Msg)
			if err := r.Unpack(raw); err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("%s %s size %d", q.name, dns.TypeToString[q.qtype], size)
			if len(raw) > limit {
				t.Errorf("%s: %d bytes over udp, limit %d", what, len(raw), limit)
			}
			if len(r.Answer) < len(full.Answer) && !r.Truncated {
				t.Errorf("%s: %d of %d answers without TC", what, len(r.Answer), len(full.Answer))
			}
			if q.qtype == dns.TypeANY {
				// RFC 8482: one small record, whatever the name holds.
				if len(full.Answer) != 1 || full.Answer[0].Header().Rrtype != dns.TypeHINFO {
					t.Errorf("%s: ANY answered %v, want one HINFO", what, full.Answer)
				}
			}
			got := <-ts.traffic
			if got != (udpTraffic{q.qtype, len(pack(t, m)), len(raw)}) {
				t.Errorf("%s: traffic %+v, want %d bytes in, %d out", what, got, len(pack(t, m)), len(raw))
			}
		}
	}
}

// TestUDPTraffic: what Options.UDP hears for datagrams that get no reply
// or have no question.
func TestUDPTraffic(t *testing.T) {
	v, _ := exampleView(t)
	ts := start(t, v)
	resp := query("example.test.", dns.TypeSOA)
	resp.Response = true
	headerOnly := new(dns.Msg)
	headerOnly.Opcode = dns.OpcodeStatus
	for _, tt := range []struct {
		name  string
		raw   []byte
		reply bool
	}{
		{"a response, dropped", pack(t, resp), false},
		{"short of a header, dropped", []byte{1, 2, 3}, false},
		{"a header alone, answered", pack(t, headerOnly), true},
	} {
		raw := ts.exchange(t, "udp", tt.raw)
		ts.outcome(t)
		got := <-ts.traffic
		if got.qtype != 0 || got.in != len(tt.raw) || got.out != len(raw) || (got.out > 0) != tt.reply {
			t.Errorf("%s: traffic %+v, reply of %d bytes", tt.name, got, len(raw))
		}
	}
}
