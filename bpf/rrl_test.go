package bpf_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// loadRRL loads the program with rate limiting on, into a private bpffs.
func loadRRL(t testing.TB, r loader.RRL) *loader.Objects {
	t.Helper()
	return loadWith(t, loader.Options{RRL: r})
}

// rrlTest is 5 replies a second per key, every second reply over the limit
// slipped, and a window long enough that no test outlives it.
var rrlTest = loader.RRL{Rate: 5, Slip: 2, Window: time.Minute, IPv4Prefix: 24, IPv6Prefix: 56,
	Exempt: []netip.Prefix{netip.MustParsePrefix("198.18.9.0/24"), netip.MustParsePrefix("fd53:9::/32")}}

// from is a frame of query q from client.
func from(client netip.Addr, q []byte) []byte {
	f := frame(client.Is6(), q, packet.Full)
	f.Src = netip.AddrPortFrom(client, 40000)
	return packet.Build(f)
}

// verdicts runs n copies of a frame and returns what each came to.
func verdicts(t *testing.T, o *loader.Objects, in []byte, n int) []string {
	t.Helper()
	var got []string
	for range n {
		ret, out := run(t, o, in)
		switch ret {
		case 1: // XDP_DROP
			got = append(got, "drop")
		case 3: // XDP_TX
			r, err := packet.Parse(out)
			if err != nil {
				t.Fatalf("reply frame: %v", err)
			}
			var m dns.Msg
			if err := m.Unpack(r.Payload); err != nil {
				t.Fatalf("unpacking the reply: %v", err)
			}
			switch {
			case m.Truncated && len(m.Answer) == 0 && len(m.Ns) == 0 && len(m.Question) == 1:
				got = append(got, "slip")
			case !m.Truncated && (len(m.Answer) > 0 || m.Rcode != dns.RcodeSuccess):
				got = append(got, "answer")
			default:
				t.Fatalf("reply neither an answer nor a slip:\n%v", &m)
			}
		default:
			t.Fatalf("action %d", ret)
		}
	}
	return got
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRRLLimits: a key gets its rate in a burst, then every second reply
// over the limit slips (TC=1, no records, checksums verified by
// packet.Parse) and the rest are dropped; another prefix, another name
// and an exempt prefix are not limited by it.
func TestRRLLimits(t *testing.T) {
	o := loadRRL(t, rrlTest)
	fixtures(t, o)
	pinCPU(t, 0)
	q := query("www.example.test.", dns.TypeA, withOpt(1232, false))
	want := []string{"answer", "answer", "answer", "answer", "answer", "drop", "slip", "drop", "slip", "drop"}
	for _, c := range []string{"198.18.0.1", "fd53::1"} {
		got := verdicts(t, o, from(netip.MustParseAddr(c), q), 10)
		if !equal(got, want) {
			t.Errorf("client %s: %v, want %v", c, got, want)
		}
	}
	// The same /24 and /56: one key, already over.
	for _, c := range []string{"198.18.0.200", "fd53:0:0:ff::7"} {
		if got := verdicts(t, o, from(netip.MustParseAddr(c), q), 1); got[0] == "answer" {
			t.Errorf("client %s in a limited prefix was answered", c)
		}
	}
	// Another prefix, another name, an exempt prefix: answered.
	for _, c := range []struct {
		client string
		q      []byte
		n      int
	}{
		{"198.18.1.1", q, 5},
		{"fd53:0:0:100::1", q, 5},
		{"198.18.0.1", query("www.example.test.", dns.TypeAAAA, nil), 5},
		{"198.18.9.1", q, 20},
		{"fd53:9::1", q, 20},
	} {
		for i, v := range verdicts(t, o, from(netip.MustParseAddr(c.client), c.q), c.n) {
			if v != "answer" {
				t.Fatalf("client %s, reply %d: %s, want an answer", c.client, i+1, v)
			}
		}
	}
	out, err := o.Outcomes()
	if err != nil {
		t.Fatal(err)
	}
	if s, d := out[bpf.SteadydnsOutcomeOUT_RRL_SLIPPED], out[bpf.SteadydnsOutcomeOUT_RRL_DROPPED]; s < 4 || d < 6 {
		t.Errorf("counted %d slipped and %d dropped, want at least 4 and 6", s, d)
	}
}

// TestRRLKeyTwin: the key XDP accounts a reply under is the one the
// loader derives for the fallback, for answers and errors over IPv4 and
// IPv6, so the two paths share each budget; and each path's replies use
// up the other's.
func TestRRLKeyTwin(t *testing.T) {
	o := loadRRL(t, rrlTest)
	fixtures(t, o)
	sf := rrset(30, 8, cand{addr: "198.18.1.9", check: 50})
	sf.WhenAllDown = uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_SERVFAIL)
	put(t, o, "sf.example.test.", dns.TypeA, sf)
	cases := []struct {
		client string
		name   string
		qtype  uint16
		resp   uint64
	}{
		{"198.18.0.77", "WWW.example.test.", dns.TypeA, loader.RRLAnswer(wire(t, "www.example.test."), dns.TypeA)},
		{"fd53::1:2:3", "www.example.test.", dns.TypeAAAA, loader.RRLAnswer(wire(t, "www.example.test."), dns.TypeAAAA)},
		{"198.18.0.78", "sf.example.test.", dns.TypeA, loader.RRLError(dns.RcodeServerFailure)},
	}
	for _, c := range cases {
		client := netip.MustParseAddr(c.client)
		verdicts(t, o, from(client, query(c.name, c.qtype, nil)), 1)
		if _, ok := o.RRLTat(client, c.resp); !ok {
			t.Errorf("%s %s from %s: no account under the loader's key", c.name, dns.TypeToString[c.qtype], c.client)
		}
	}
	if n := o.RRLAccounts(); n != len(cases) {
		t.Errorf("%d accounts, want %d", n, len(cases))
	}

	// XDP's 5 answers leave the fallback nothing.
	client := netip.MustParseAddr("198.18.3.1")
	a := loader.RRLAnswer(wire(t, "www.example.test."), dns.TypeA)
	verdicts(t, o, from(client, query("www.example.test.", dns.TypeA, nil)), 5)
	if v := o.RRLAccount(client, a, loader.BootNs()); v == loader.RRLSend {
		t.Errorf("the fallback's reply after XDP's 5: %v; want it limited", v)
	}
	// The fallback's 5 leave XDP nothing.
	client = netip.MustParseAddr("198.18.4.1")
	for i := range 5 {
		if v := o.RRLAccount(client, a, loader.BootNs()); v != loader.RRLSend {
			t.Fatalf("the fallback's reply %d: %v; want it sent", i+1, v)
		}
	}
	if got := verdicts(t, o, from(client, query("www.example.test.", dns.TypeA, nil)), 1); got[0] == "answer" {
		t.Errorf("XDP answered after the fallback's 5")
	}
}
