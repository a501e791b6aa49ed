package bpf_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// putSOA gives zone zi an SOA whose apex is apex.
func putSOA(t *testing.T, o *loader.Objects, zi int, apex string) {
	t.Helper()
	soa := bpf.SteadydnsZoneSoa{Ttl: 300, ApexLen: uint8(len(wire(t, apex)))}
	rdata := wire(t, "ns."+apex) + wire(t, "host."+apex) + strings.Repeat("\x00\x00\x00\x01", 5)
	soa.Rdlen = uint16(copy(soa.Rdata[:], rdata))
	if err := o.PutZoneSOA(zi, &soa); err != nil {
		t.Fatal(err)
	}
}

// whenDown is a set of one candidate whose check (50) is down, answered
// as policy says, in zone zi.
func whenDown(policy bpf.SteadydnsWhenAllDown, zi uint8) *bpf.SteadydnsRrset {
	v := rrset(30, 8, cand{addr: "198.18.1.9", check: 50})
	v.WhenAllDown = uint8(policy)
	v.Zone = zi
	return v
}

// truncated reports whether the reply in frame b has TC set.
func truncated(t *testing.T, b []byte) bool {
	t.Helper()
	r, err := packet.Parse(b)
	if err != nil {
		t.Fatalf("reply frame: %v", err)
	}
	return len(r.Payload) < 12 || r.Payload[2]&0x02 != 0
}

// TestRRLSlipBytes: a slipped reply is the query's header and question
// alone, whatever the reply would have carried: the frame's IP and UDP
// headers, 12 bytes of header (TC set, QD 1, AN, NS and AR 0, the rcode
// and AA of the reply it stands for) and the question as asked, with no
// OPT and so no NSID, over IPv4 and IPv6, for an answer, a NODATA and a
// SERVFAIL, with both checksums right.
func TestRRLSlipBytes(t *testing.T) {
	// Rate 1, every reply over it slipped: a key's first reply is
	// answered, its second slipped.
	o := loadWith(t, loader.Options{NSID: bytes.Repeat([]byte{0xa5}, loader.MaxNSID),
		RRL: loader.RRL{Rate: 1, Slip: 1, Window: time.Minute, IPv4Prefix: 24, IPv6Prefix: 56}})
	fixtures(t, o)
	put(t, o, "nd.example.test.", dns.TypeA, whenDown(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA, 0))
	put(t, o, "sf.example.test.", dns.TypeA, whenDown(bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL, 0))
	putSOA(t, o, 0, "example.test.")
	pinCPU(t, 0)
	nsid := withOpt(1232, true, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	cd := func(m *dns.Msg) { nsid(m); m.CheckingDisabled = true }
	client := 0
	for _, c := range []struct {
		name  string
		qtype uint16
		edit  func(*dns.Msg)
		flags uint16 // of the slipped reply
	}{
		{"www.example.test.", dns.TypeA, nsid, 0x8700},
		{"www.example.test.", dns.TypeAAAA, nil, 0x8700},
		{"WWW.Example.Test.", dns.TypeA, cd, 0x8710},
		{name255, dns.TypeAAAA, nsid, 0x8700},
		{"nd.example.test.", dns.TypeA, nsid, 0x8700},
		{"nd.example.test.", dns.TypeA, nil, 0x8700},
		{"sf.example.test.", dns.TypeA, nsid, 0x8302},
		{"sf.example.test.", dns.TypeA, nil, 0x8302},
	} {
		for _, v6 := range []bool{false, true} {
			client++
			src := netip.MustParseAddr(fmt.Sprintf("198.18.%d.1", 100+client))
			if v6 {
				src = netip.MustParseAddr(fmt.Sprintf("fd53:0:0:%x00::1", client))
			}
			what := fmt.Sprintf("%s %s from %s", c.name, dns.TypeToString[c.qtype], src)
			q := query(c.name, c.qtype, c.edit)
			in := from(src, q)
			if ret, first := run(t, o, in); ret != 3 || truncated(t, first) {
				t.Fatalf("%s: first query: action %d, want the reply whole (XDP_TX, TC clear)", what, ret)
			}
			ret, out := run(t, o, in)
			if ret != 3 {
				t.Fatalf("%s: second query: action %d, want XDP_TX (slipped)", what, ret)
			}
			r, err := packet.Parse(out)
			if err != nil {
				t.Fatalf("%s: slipped reply: %v", what, err)
			}
			qEnd := 12 + len(wire(t, c.name)) + 4
			l3 := 20
			if v6 {
				l3 = 40
			}
			if len(out) != 14+l3+8+qEnd {
				t.Errorf("%s: slipped frame of %d bytes, want %d: headers, 12 and the question's %d", what, len(out), 14+l3+8+qEnd, qEnd-12)
			}
			want := append([]byte(nil), q[:qEnd]...)
			binary.BigEndian.PutUint16(want[2:], c.flags)
			binary.BigEndian.PutUint16(want[4:], 1)
			clear(want[6:12])
			if !bytes.Equal(r.Payload, want) {
				dumpf(t, "%s: slipped reply", q, want, r.Payload, what)
			}
		}
	}
	out, err := o.Outcomes()
	if err != nil {
		t.Fatal(err)
	}
	if n := out[bpf.SteadydnsOutcomeOUT_RRL_SLIPPED]; n != uint64(client) {
		t.Errorf("counted %d slipped, want %d", n, client)
	}
}

// TestRRLPassedUncharged: a query XDP passes to the fallback after
// looking its set up (a NODATA without the zone's SOA, an answer too
// large for the client) is not charged in XDP, so the fallback, which
// charges what it answers, limits it at exactly the rate: a burst of
// rate replies, then none.
func TestRRLPassedUncharged(t *testing.T) {
	const rate = 5
	o := loadWith(t, loader.Options{NSID: []byte("edge-ams-1"),
		RRL: loader.RRL{Rate: rate, Slip: 2, Window: time.Minute, IPv4Prefix: 24, IPv6Prefix: 56}})
	fixtures(t, o)
	put(t, o, "nosoa.example.test.", dns.TypeA, whenDown(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA, 1))
	eight := make([]cand, 8)
	for i := range eight {
		eight[i] = cand{addr: fmt.Sprintf("fd53:8::%d", i+1)}
	}
	put(t, o, name255, dns.TypeAAAA, rrset(300, 8, eight...))
	pinCPU(t, 0)
	for i, c := range []struct {
		name  string
		qtype uint16
		edit  func(*dns.Msg)
	}{
		{"nosoa.example.test.", dns.TypeA, nil},
		{name255, dns.TypeAAAA, withOpt(512, false, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})},
	} {
		client := netip.MustParseAddr(fmt.Sprintf("198.18.%d.1", 50+i))
		resp := loader.RRLAnswer(wire(t, c.name), c.qtype)
		in := from(client, query(c.name, c.qtype, c.edit))
		sent := 0
		for range 4 * rate {
			before, had := o.RRLTat(client, resp)
			if ret, _ := run(t, o, in); ret != 2 {
				t.Fatalf("%s: action %d, want XDP_PASS", c.name, ret)
			}
			if after, has := o.RRLTat(client, resp); after != before || has != had {
				t.Fatalf("%s: passed by XDP, and charged there", c.name)
			}
			// The fallback's charge for its reply.
			if o.RRLAccount(client, resp, loader.BootNs()) == loader.RRLSend {
				sent++
			}
		}
		if sent != rate {
			t.Errorf("%s: the fallback sent %d of %d, want the rate, %d", c.name, sent, 4*rate, rate)
		}
	}
}
