package bpf_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// expectedNSID is expected with the NSID option in the OPT, as the
// fallback writes it.
func expectedNSID(t *testing.T, q []byte, ttl uint32, nsid []byte, addrs ...string) []byte {
	t.Helper()
	var m dns.Msg
	if err := m.Unpack(expected(t, q, ttl, addrs...)); err != nil {
		t.Fatal(err)
	}
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: hex.EncodeToString(nsid)})
	m.Compress = true
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNSID: a query whose OPT carries NSID gets the configured value in
// the reply's OPT, byte for byte as the fallback writes it, with both
// checksums right, for values of odd and even length at names of odd and
// even length; a query without the option, or a program without a value,
// gets none; a reply NSID would take past the client's size is passed.
func TestNSID(t *testing.T) {
	www := []string{"198.18.1.1", "198.18.1.2", "198.18.1.3"}
	www6 := []string{"fd53:1::1", "fd53:1::2"}
	eight := make([]cand, 8)
	for i := range eight {
		eight[i] = cand{addr: fmt.Sprintf("fd53:8::%d", i+1)}
	}
	asked := func(size uint16, do bool, extra ...dns.EDNS0) func(*dns.Msg) {
		return withOpt(size, do, append(extra, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})...)
	}
	for _, value := range [][]byte{[]byte("edge-ams-1"), {'x', 0, 0xff}, bytes.Repeat([]byte{0xa5}, loader.MaxNSID)} {
		t.Run(fmt.Sprintf("%d bytes", len(value)), func(t *testing.T) {
			o := loadWith(t, loader.Options{NSID: value})
			fixtures(t, o)
			put(t, o, "ab.test.", dns.TypeA, rrset(300, 8, cand{addr: "198.18.2.9"}))
			for _, c := range []struct {
				name   string
				v6     bool
				csum   packet.Checksum
				q      []byte
				ttl    uint32
				answer []string
				nsid   bool
			}{
				{"A over ipv4", false, packet.Full, query("www.example.test.", dns.TypeA, asked(1232, false)), 30, www, true},
				{"AAAA over ipv6, partial checksum", true, packet.Partial, query("WWW.example.test.", dns.TypeAAAA, asked(1232, true)), 30, www6, true},
				{"odd name length", false, packet.Partial, query("ab.test.", dns.TypeA, asked(512, false)), 300, []string{"198.18.2.9"}, true},
				{"payload ignored, beside a cookie", false, packet.Full, query("www.example.test.", dns.TypeA, asked(1232, false, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "0102"})), 30, www, true},
				{"255-byte name", true, packet.Full, query(strings.ToUpper(name255), dns.TypeAAAA, asked(1232, false)), 300, []string{"fd53:2::255"}, true},
				{"not asked", false, packet.Full, query("www.example.test.", dns.TypeA, withOpt(1232, false)), 30, www, false},
				{"no OPT", true, packet.Full, query("www.example.test.", dns.TypeAAAA, nil), 30, www6, false},
			} {
				t.Run(c.name, func(t *testing.T) {
					f := frame(c.v6, c.q, c.csum)
					in := packet.Build(f)
					ret, out := run(t, o, in)
					want := expected(t, c.q, c.ttl, c.answer...)
					if c.nsid {
						want = expectedNSID(t, c.q, c.ttl, value, c.answer...)
					}
					if ret != 3 {
						dumpf(t, "action %d, want XDP_TX", in, want, out, ret)
						return
					}
					r, err := packet.Parse(out)
					if err != nil {
						dumpf(t, "reply frame: %v", in, want, out, err)
						return
					}
					if !bytes.Equal(r.Payload, want) {
						dumpf(t, "dns reply differs", in, want, r.Payload)
					}
				})
			}
			// 8 AAAA at a 255-byte name fill 506 bytes with OPT: NSID
			// takes the reply past a 512-byte client's size, so the
			// fallback answers (and truncates) it.
			put(t, o, name255, dns.TypeAAAA, rrset(300, 8, eight...))
			in := packet.Build(frame(false, query(name255, dns.TypeAAAA, asked(512, false)), packet.Full))
			before, err := o.Outcomes()
			if err != nil {
				t.Fatal(err)
			}
			if ret, _ := run(t, o, in); ret != 2 {
				t.Errorf("a reply past the client's size: action %d, want XDP_PASS", ret)
			}
			after, err := o.Outcomes()
			if err != nil {
				t.Fatal(err)
			}
			if d := after[bpf.SteadydnsOutcomeOUT_TRUNCATED] - before[bpf.SteadydnsOutcomeOUT_TRUNCATED]; d != 1 {
				t.Errorf("truncated counted %d times, want 1", d)
			}
			in = packet.Build(frame(false, query(name255, dns.TypeAAAA, withOpt(512, false)), packet.Full))
			if ret, _ := run(t, o, in); ret != 3 {
				t.Errorf("the same reply without NSID: action %d, want XDP_TX", ret)
			}
		})
	}

	t.Run("unset", func(t *testing.T) {
		o := load(t)
		fixtures(t, o)
		q := query("www.example.test.", dns.TypeA, asked(1232, false))
		in := packet.Build(frame(false, q, packet.Full))
		ret, out := run(t, o, in)
		want := expected(t, q, 30, www...)
		if ret != 3 {
			dumpf(t, "action %d, want XDP_TX", in, want, out, ret)
			return
		}
		r, err := packet.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Payload, want) {
			dumpf(t, "dns reply differs", in, want, r.Payload)
		}
	})
}
