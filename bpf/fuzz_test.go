package bpf_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// The fuzzed world: record sets whose answers depend on four checks, the
// down ones chosen by the input, and static sets from the zone file (wide:
// eight A and eight AAAA, packed to their full width). The
// sets named rnd* draw at random (weighted, round robin, multivalue over
// max_answers): for them the two paths agree on everything but which
// candidates were drawn, and each draw must be one of the set's.
const fuzzZone = `$ORIGIN example.test.
$TTL 300
@      SOA ns1 hostmaster 1 7200 3600 1209600 120
@      NS  ns1
ns1    A   198.18.0.2
ns1    AAAA fd53::2
static A   198.18.3.1
static A   198.18.3.2
wide   A   198.18.4.1
wide   A   198.18.4.2
wide   A   198.18.4.3
wide   A   198.18.4.4
wide   A   198.18.4.5
wide   A   198.18.4.6
wide   A   198.18.4.7
wide   A   198.18.4.8
wide   AAAA fd53:4::1
wide   AAAA fd53:4::2
wide   AAAA fd53:4::3
wide   AAAA fd53:4::4
wide   AAAA fd53:4::5
wide   AAAA fd53:4::6
wide   AAAA fd53:4::7
wide   AAAA fd53:4::8
alias  CNAME static
`

var fuzzConfig = `server:
  listen: ["127.0.0.1:53"]
  geo:
    regions:
      eu: { prefixes: ["198.18.0.0/25", "fd53::/64"], next: [us] }
      us: { prefixes: ["198.18.0.128/25", "fd53:0:0:1::/64"], next: [eu] }
zones:
  - origin: example.test.
    file: z.zone
health_checks:
  c1: { type: tcp, target: 198.18.1.1, port: 80 }
  c2: { type: tcp, target: 198.18.1.2, port: 80 }
  c3: { type: tcp, target: 198.18.1.3, port: 80 }
  c4: { type: tcp, target: 198.18.1.4, port: 80 }
records:
  - name: fo.example.test.
    type: A
    ttl: 30
    ttl_degraded: 5
    policy: failover
    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3, priority: 1}, {value: 198.18.1.4, check: c4, backup: true}]
  - name: fo.example.test.
    type: AAAA
    policy: failover
    when_all_down: nodata
    answers: [{value: "fd53:1::1", check: c1}, {value: "fd53:1::2", check: c2, priority: 1}]
  - name: mv.example.test.
    type: A
    max_answers: 8
    min_healthy: 2
    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}, {value: 198.18.1.4, check: c4}]
  - name: sf.example.test.
    type: A
    when_all_down: servfail
    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}]
  - name: geo.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: c1, region: eu}, {value: 198.18.1.2, check: c2, region: us}, {value: 198.18.1.3, check: c3, region: us}]
  - name: geo.example.test.
    type: AAAA
    answers: [{value: "fd53:1::1", check: c1, region: eu}, {value: "fd53:1::2", check: c2, region: us}]
  - name: MiXeD.Example.Test.
    type: A
    answers: [{value: 198.18.1.1, check: c1}]
  - name: ` + strings.Repeat("l", 63) + `.` + strings.Repeat("o", 63) + `.` + strings.Repeat("n", 63) + `.` + strings.Repeat("g", 48) + `.example.test.
    type: AAAA
    answers: [{value: "fd53:1::1", check: c1}, {value: "fd53:1::2", check: c2}]
  - name: rndw.example.test.
    type: A
    policy: weighted
    answers: [{value: 198.18.1.1, check: c1, weight: 1}, {value: 198.18.1.2, check: c2, weight: 3}, {value: 198.18.1.3, check: c3, weight: 0}]
  - name: rndr.example.test.
    type: AAAA
    policy: round_robin
    max_answers: 1
    answers: [{value: "fd53:1::1", check: c1}, {value: "fd53:1::2", check: c2}, {value: "fd53:1::3", check: c3}]
  - name: rndm.example.test.
    type: A
    max_answers: 2
    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}, {value: 198.18.1.3, check: c3}, {value: 198.18.1.4, check: c4}]
`

// fuzzWorld is the data plane and the fallback's handler, both answering
// from one compiled config and one health table.
type fuzzWorld struct {
	objs     *loader.Objects
	table    *edge.Table
	fallback *fallback.Server
	checks   []uint32 // c1…c4's table entries
	version  uint64
	hash     uint64
}

// fuzzNSID is both paths' NSID: a query with the option gets it.
var fuzzNSID = []byte("fuzz-edge")

func newFuzzWorld(t testing.TB) *fuzzWorld {
	o := loadWith(t, loader.Options{NSID: fuzzNSID})
	sv := serve(t, o, fuzzConfig, fuzzZone)
	cfg, z, index, comp, g := sv.cfg, sv.zone, sv.index, sv.comp, sv.geo
	w := &fuzzWorld{objs: o, table: edge.New(o, bpf.SteadydnsTableMeta{}), hash: cfg.Hash}
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		w.checks = append(w.checks, index[id])
	}
	w.fallback = fallback.New(fallback.Options{NSID: fuzzNSID}, &fallback.View{Zones: zone.NewZones(z), Records: records.NewAnswerer(comp, w.table, g)})
	return w
}

// setDown writes a table in which check c(i+1) is down when bit i of down
// is set, through the edge's table, as a pushed table arrives.
func (w *fuzzWorld) setDown(t testing.TB, down uint8) {
	table := make([]byte, healthtable.Bytes(w.objs.HealthCapacity()))
	healthtable.Put(table, 0, true, 0)
	for i, e := range w.checks {
		healthtable.Put(table, e, down&(1<<i) == 0, 0)
	}
	w.version++
	if err := w.table.WriteHealth(table, w.version, w.hash, 0); err != nil {
		t.Fatal(err)
	}
}

// fuzz modes: how FuzzXDP builds its frame from the fuzzed payload.
const (
	modeV6        = 1 << iota // IPv6 rather than IPv4
	modePartial               // the UDP checksum as CHECKSUM_PARTIAL leaves it
	modeZero                  // no UDP checksum (IPv4)
	modeOtherGeo              // the client is in region us, not eu
	modeOtherPort             // destination port is the fuzzed source port, not 53
	modeRaw       = 1 << 7    // the payload is the whole frame
)

// udpQuery is what the XDP program takes a frame for: its addresses and
// ports and the DNS message, read from the headers' lengths.
func udpQuery(b []byte) (src, dst netip.AddrPort, payload []byte, ok bool) {
	if len(b) < 14 {
		return src, dst, nil, false
	}
	var udp []byte
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		ip := b[14:]
		if len(ip) < 20 {
			return src, dst, nil, false
		}
		ihl, total := int(ip[0]&0xf)*4, int(binary.BigEndian.Uint16(ip[2:]))
		if ihl < 20 || total < ihl+8 || total > len(ip) {
			return src, dst, nil, false
		}
		udp = ip[ihl:total]
		src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(udp))
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(udp[2:]))
	case 0x86dd:
		ip := b[14:]
		if len(ip) < 48 || 40+int(binary.BigEndian.Uint16(ip[4:])) > len(ip) {
			return src, dst, nil, false
		}
		udp = ip[40 : 40+int(binary.BigEndian.Uint16(ip[4:]))]
		if len(udp) < 8 {
			return src, dst, nil, false
		}
		src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[8:24])), binary.BigEndian.Uint16(udp))
		dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(ip[24:40])), binary.BigEndian.Uint16(udp[2:]))
	default:
		return src, dst, nil, false
	}
	n := int(binary.BigEndian.Uint16(udp[4:]))
	if n < 8 || n > len(udp) {
		return src, dst, nil, false
	}
	return src, dst, udp[8:n], true
}

// questionLen is the length of the question section of a query whose
// name has no compression, as XDP answers only such.
func questionLen(q []byte) int {
	p := 12
	for p < len(q) && q[p] != 0 {
		p += 1 + int(q[p])
	}
	return p + 1 + 4 - 12
}

// FuzzXDP runs frames through the XDP program. Each one is either passed
// untouched or answered with a frame that parses, whose IPv4 header and
// UDP checksums verify, that goes back to the client, answers the question
// as it was asked (ID, and the question byte for byte), fits the client's
// size, and says what the fallback's UDP path (AnswerDatagram) says to the
// same datagram under the same health table. The input is a DNS message put into a frame as mode says,
// or, with modeRaw, the whole frame.
func FuzzXDP(f *testing.F) {
	w := newFuzzWorld(f)
	addSeeds(f)
	f.Fuzz(func(t *testing.T, mode uint8, sport uint16, down uint8, data []byte) {
		var in []byte
		if mode&modeRaw != 0 {
			in = data
		} else {
			fr := frame(mode&modeV6 != 0, data, packet.Full)
			switch {
			case mode&modePartial != 0:
				fr.Checksum = packet.Partial
			case mode&modeZero != 0 && mode&modeV6 == 0:
				fr.Checksum = packet.Zero
			}
			client := client4
			if mode&modeV6 != 0 {
				client = client6
			}
			if mode&modeOtherGeo != 0 {
				client = netip.MustParseAddr("198.18.0.200")
				if mode&modeV6 != 0 {
					client = netip.MustParseAddr("fd53:0:0:1::1")
				}
			}
			fr.Src = netip.AddrPortFrom(client, sport)
			if mode&modeOtherPort != 0 {
				fr.Dst = netip.AddrPortFrom(fr.Dst.Addr(), sport)
			}
			in = packet.Build(fr)
		}
		// BPF_PROG_RUN takes frames from an Ethernet header to a page.
		if len(in) < 14 || len(in) > 3000 {
			return
		}
		w.setDown(t, down)
		in = slices.Clone(in)
		out := make([]byte, 4096)
		opts := &ebpf.RunOptions{Data: in, DataOut: out}
		ret, err := w.objs.Steadydns.Run(opts)
		if err != nil {
			t.Fatalf("running the program: %v", err)
		}
		out = opts.DataOut
		switch ret {
		case 2: // XDP_PASS
			if !bytes.Equal(out, in) {
				t.Fatalf("passed a changed frame\nin:\n%x\nout:\n%x", in, out)
			}
		case 3: // XDP_TX
			w.checkReply(t, in, out)
		default:
			t.Fatalf("action %d, want XDP_PASS or XDP_TX", ret)
		}
	})
}

func (w *fuzzWorld) checkReply(t *testing.T, in, out []byte) {
	src, dst, q, ok := udpQuery(in)
	if !ok {
		t.Fatalf("answered a frame that is not UDP:\n%x", in)
	}
	r, err := packet.Parse(out)
	if err != nil {
		t.Fatalf("reply frame: %v\nin:\n%x\nout:\n%x", err, in, out)
	}
	if r.Src != dst || r.Dst != src || !bytes.Equal(r.SrcMAC[:], in[0:6]) || !bytes.Equal(r.DstMAC[:], in[6:12]) {
		t.Errorf("reply %v→%v (%x→%x) to a query %v→%v (%x→%x)", r.Src, r.Dst, r.SrcMAC, r.DstMAC, src, dst, in[6:12], in[0:6])
	}
	var reply dns.Msg
	if err := reply.Unpack(r.Payload); err != nil {
		t.Fatalf("reply does not unpack: %v\n%x", err, r.Payload)
	}
	if reply.Id != binary.BigEndian.Uint16(q) || !reply.Response || len(reply.Question) != 1 {
		t.Errorf("reply id %#04x response %v questions %d, query id %#04x", reply.Id, reply.Response, len(reply.Question), binary.BigEndian.Uint16(q))
	}
	ql := questionLen(q)
	if len(r.Payload) < 12+ql || !bytes.Equal(r.Payload[12:12+ql], q[12:12+ql]) || binary.BigEndian.Uint16(r.Payload[4:]) != 1 {
		t.Fatalf("question not echoed byte for byte:\nquery %x\nreply %x", q, r.Payload)
	}
	// The client's size: 512, or its OPT's, which XDP takes only right
	// after the question.
	limit := dns.MinMsgSize
	if q[11] == 1 {
		limit = max(limit, int(binary.BigEndian.Uint16(q[12+ql+3:])))
	}
	if len(r.Payload) > limit {
		t.Errorf("reply of %d bytes to a client whose size is %d", len(r.Payload), limit)
	}

	b := w.fallback.AnswerDatagram(q, src)
	if b == nil {
		t.Fatalf("the fallback does not answer a query XDP answered:\n%x", q)
	}
	var fb dns.Msg
	if err := fb.Unpack(b); err != nil {
		t.Fatalf("unpacking the fallback's reply: %v", err)
	}
	question := reply.Question[0]
	name := strings.ToLower(question.Name)
	xs, fs := summary(&reply, name), summary(&fb, name)
	if xs != fs {
		t.Errorf("xdp and the fallback differ on %x (%s %s)\nxdp:\n%s\nfallback:\n%s", q, question.Name, dns.TypeToString[question.Qtype], xs, fs)
	}
	if strings.HasPrefix(name, "rnd") {
		allowed := fuzzCandidates[name]
		for _, rr := range reply.Answer {
			if a := rdataOf(rr); !slices.Contains(allowed, a) {
				t.Errorf("xdp answered %s for %s, not a candidate (%v)", a, name, allowed)
			}
		}
	}
}

// fuzzCandidates are the random sets' candidates.
var fuzzCandidates = map[string][]string{
	"rndw.example.test.": {"198.18.1.1", "198.18.1.2", "198.18.1.3"},
	"rndr.example.test.": {"fd53:1::1", "fd53:1::2", "fd53:1::3"},
	"rndm.example.test.": {"198.18.1.1", "198.18.1.2", "198.18.1.3", "198.18.1.4"},
}

func rdataOf(rr dns.RR) string {
	switch rr := rr.(type) {
	case *dns.A:
		return rr.A.String()
	case *dns.AAAA:
		return rr.AAAA.String()
	}
	// The rest of the record without its header: owners are compared
	// lowercased, as names compare, and XDP spells a suffix of the
	// question's name, as asked, where the zone file's spelling may differ.
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// summary is what both paths must agree on: the header's flags and rcode,
// every section's records with owners lowercased, and the OPT. A random
// set's addresses are left out: which ones were drawn may differ.
func summary(m *dns.Msg, qname string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "opcode %d rcode %s aa %v tc %v rd %v ra %v ad %v cd %v z %v\n", m.Opcode, dns.RcodeToString[m.Rcode],
		m.Authoritative, m.Truncated, m.RecursionDesired, m.RecursionAvailable, m.AuthenticatedData, m.CheckingDisabled, m.Zero)
	random := strings.HasPrefix(qname, "rnd")
	for i, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if opt, ok := rr.(*dns.OPT); ok {
				fmt.Fprintf(&b, "%d OPT size %d do %v version %d extrcode %d options %v\n", i, opt.UDPSize(), opt.Do(), opt.Version(), opt.ExtendedRcode(), opt.Option)
				continue
			}
			data := rdataOf(rr)
			if random && i == 0 {
				data = "(drawn)"
			}
			fmt.Fprintf(&b, "%d %s %d %s %s %s\n", i, strings.ToLower(h.Name), h.Ttl, dns.ClassToString[h.Class], dns.TypeToString[h.Rrtype], data)
		}
	}
	return b.String()
}

// addSeeds adds the queries the corpus starts from, beside
// testdata/fuzz/FuzzXDP: each record set and static name over both
// families, EDNS, 0x20, long names, and queries XDP passes.
func addSeeds(f *testing.F) {
	q := func(name string, qtype uint16, mutate func(*dns.Msg)) []byte { return query(name, qtype, mutate) }
	for _, n := range []string{"fo", "mv", "sf", "geo", "rndw", "rndr", "rndm", "ns1", "static", "wide", "alias", "nope"} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			f.Add(uint8(0), uint16(40000), uint8(0), q(n+".example.test.", qt, nil))
			f.Add(uint8(modeV6|modeOtherGeo), uint16(5353), uint8(0b0011), q(n+".example.test.", qt, withOpt(1232, true)))
		}
	}
	f.Add(uint8(modePartial), uint16(1), uint8(0b1111), q("MIXED.example.TEST.", dns.TypeA, withOpt(512, false)))
	f.Add(uint8(modeZero), uint16(65535), uint8(0b0101), q("mixed.example.test.", dns.TypeA, withOpt(100, false)))
	long := strings.Repeat("L", 63) + "." + strings.Repeat("o", 63) + "." + strings.Repeat("N", 63) + "." + strings.Repeat("g", 48) + ".example.test."
	f.Add(uint8(modeV6|modePartial), uint16(53), uint8(0b0001), q(long, dns.TypeAAAA, withOpt(4096, true)))
	f.Add(uint8(modeOtherPort), uint16(53), uint8(0), q("fo.example.test.", dns.TypeA, nil))
	// NSID asked: answers, NODATA (fo AAAA, all down) and SERVFAIL (sf,
	// all down), a payload the server ignores, beside ECS and a cookie,
	// and the longest name with 8 answers, which no longer fits 512.
	nsid := &dns.EDNS0_NSID{Code: dns.EDNS0NSID}
	f.Add(uint8(0), uint16(40000), uint8(0), q("fo.example.test.", dns.TypeA, withOpt(1232, false, nsid)))
	f.Add(uint8(modeV6|modePartial), uint16(40000), uint8(0b1111), q("fo.example.test.", dns.TypeAAAA, withOpt(1232, true, nsid)))
	f.Add(uint8(0), uint16(40000), uint8(0b1111), q("sf.example.test.", dns.TypeA, withOpt(512, false, nsid)))
	f.Add(uint8(0), uint16(40000), uint8(0), q("mv.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "0102"})))
	f.Add(uint8(modeV6), uint16(40000), uint8(0), q("rndr.example.test.", dns.TypeAAAA, withOpt(1232, false, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}, nsid)))
	f.Add(uint8(0), uint16(40000), uint8(0), q("geo.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.18.0.0").To4()}, nsid)))
	f.Add(uint8(modeV6), uint16(40000), uint8(0), q(long, dns.TypeAAAA, withOpt(512, false, nsid)))
	ecs := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.18.0.0").To4()}
	f.Add(uint8(0), uint16(40000), uint8(0), q("geo.example.test.", dns.TypeA, withOpt(1232, false, ecs)))
	// A malformed ECS is the fallback's to refuse; an LLQ miekg/dns would
	// refuse for its length is ignored by both.
	f.Add(uint8(0), uint16(40000), uint8(0), q("fo.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 33, 0}})))
	f.Add(uint8(0), uint16(40000), uint8(0), q("fo.example.test.", dns.TypeA, withOpt(1232, false, &dns.EDNS0_LOCAL{Code: dns.EDNS0LLQ, Data: []byte{1, 2}})))
	cookie := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}
	f.Add(uint8(0), uint16(40000), uint8(0b0010), q("fo.example.test.", dns.TypeA, withOpt(1232, false, cookie)))
	fo := q("fo.example.test.", dns.TypeA, nil)
	f.Add(uint8(0), uint16(40000), uint8(0), append(fo[:12:12], 2, 'f', 'o', 0xc0, 12, 0, 1, 0, 1))
	f.Add(uint8(0), uint16(40000), uint8(0), fo[:len(fo)-3])
	f.Add(uint8(0), uint16(40000), uint8(0), fo[:7])
	f.Add(uint8(modeRaw), uint16(0), uint8(0), packet.Build(frame(false, fo, packet.Full)))
	f.Add(uint8(modeRaw), uint16(0), uint8(0b1000), packet.Build(frame(true, q("geo.example.test.", dns.TypeAAAA, nil), packet.Partial)))
}
