package fallback

import (
	"bytes"
	"encoding/hex"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// nsidValue holds bytes that are not text, as hex: in server.nsid allows.
var nsidValue = []byte("edge-1\x00\xff")

// nsidOf returns the reply's NSID value and whether it has one, failing
// on a second one.
func nsidOf(t *testing.T, m *dns.Msg) ([]byte, bool) {
	t.Helper()
	opt := m.IsEdns0()
	if opt == nil {
		return nil, false
	}
	var found []byte
	n := 0
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_NSID); ok {
			b, err := hex.DecodeString(e.Nsid)
			if err != nil {
				t.Fatalf("nsid %q: %v", e.Nsid, err)
			}
			found = b
			n++
		}
	}
	if n > 1 {
		t.Errorf("%d NSID options in one reply", n)
	}
	return found, n > 0
}

func withNSID(m *dns.Msg, payload string) *dns.Msg {
	if m.IsEdns0() == nil {
		m.SetEdns0(1232, false)
	}
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: payload})
	return m
}

func TestNSID(t *testing.T) {
	v, _ := exampleView(t)
	on := startWith(t, v, Options{NSID: nsidValue})
	off := start(t, v)
	ecs := func(m *dns.Msg) *dns.Msg {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.18.9.0").To4()})
		return m
	}
	tests := []struct {
		name   string
		ts     *testServer
		q      *dns.Msg
		want   bool
		outOpt bool // the reply has OPT
	}{
		{"MX asked", on, withNSID(query("example.test.", dns.TypeMX), ""), true, true},
		{"SOA asked, DO", on, withNSID(withEDNS(query("Example.Test.", dns.TypeSOA), 4096, true), ""), true, true},
		{"NXDOMAIN asked", on, withNSID(query("nope.example.test.", dns.TypeA), ""), true, true},
		{"REFUSED asked", on, withNSID(query("example.other.", dns.TypeA), ""), true, true},
		{"dynamic A asked", on, withNSID(query("web.example.test.", dns.TypeA), ""), true, true},
		{"payload ignored", on, withNSID(query("example.test.", dns.TypeMX), "0102"), true, true},
		{"geo with ECS, NSID after it", on, withNSID(ecs(query("geo.example.test.", dns.TypeA)), ""), true, true},
		{"OPT without NSID", on, withEDNS(query("example.test.", dns.TypeMX), 1232, false), false, true},
		{"no OPT", on, query("example.test.", dns.TypeMX), false, false},
		{"off", off, withNSID(query("example.test.", dns.TypeMX), ""), false, true},
		{"off, SOA", off, withNSID(query("example.test.", dns.TypeSOA), ""), false, true},
	}
	for _, tt := range tests {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(tt.name+" "+network, func(t *testing.T) {
				raw := tt.ts.exchange(t, network, pack(t, tt.q))
				tt.ts.outcome(t)
				var r dns.Msg
				if err := r.Unpack(raw); err != nil {
					t.Fatalf("unpacking the reply: %v", err)
				}
				if got := r.IsEdns0() != nil; got != tt.outOpt {
					t.Fatalf("reply has OPT %v, want %v", got, tt.outOpt)
				}
				got, ok := nsidOf(t, &r)
				if ok != tt.want || tt.want && !bytes.Equal(got, nsidValue) {
					t.Errorf("NSID %q (present %v), want present %v with %q", got, ok, tt.want, nsidValue)
				}
				if opt := r.IsEdns0(); opt != nil && tt.want {
					if last := opt.Option[len(opt.Option)-1]; last.Option() != dns.EDNS0NSID {
						t.Errorf("options %v: NSID is not last", opt.Option)
					}
				}
			})
		}
	}
}

// TestNSIDSameBytesAsXDP holds A answers with NSID to the bytes the XDP
// program writes.
func TestNSIDSameBytesAsXDP(t *testing.T) {
	v, _ := exampleView(t)
	ts := startWith(t, v, Options{NSID: nsidValue})
	web := dynamicSets["web.example.test. A"].Addrs
	for _, tt := range []struct {
		name string
		q    *dns.Msg
		nsid []byte
	}{
		{"asked", withNSID(query("wEB.example.TEST.", dns.TypeA), ""), nsidValue},
		{"asked with do and other options", withOptions(withNSID(withEDNS(query("web.example.test.", dns.TypeA), 4096, true), "")), nsidValue},
		{"not asked", withEDNS(query("web.example.test.", dns.TypeA), 1232, false), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := pack(t, tt.q)
			qEnd := 12 + len(tt.q.Question[0].Name) + 1 + 4
			want := xdpReply(raw, qEnd, dns.TypeA, 30, web, true, tt.q.IsEdns0().Do(), tt.nsid)
			if got := ts.exchange(t, "udp", raw); !bytes.Equal(got, want) {
				t.Errorf("reply\n got %x\nwant %x", got, want)
			}
			ts.outcome(t)
		})
	}
}

// TestNSIDKeptWithBrokenOption: a query that miekg/dns refuses for the
// content of an option steadydns ignores (EXPIRE of 2 bytes) is parsed
// again without it, and its NSID still asks for ours, as XDP answers it.
func TestNSIDKeptWithBrokenOption(t *testing.T) {
	v, _ := exampleView(t)
	ts := startWith(t, v, Options{NSID: nsidValue})
	q := withNSID(query("web.example.test.", dns.TypeA), "")
	q.IsEdns0().Option = append([]dns.EDNS0{&dns.EDNS0_LOCAL{Code: dns.EDNS0EXPIRE, Data: []byte{1, 2}}}, q.IsEdns0().Option...)
	raw := pack(t, q)
	if err := parse(raw, new(dns.Msg)); err == nil {
		t.Fatal("the query parses: it tests nothing")
	}
	var r dns.Msg
	if err := r.Unpack(ts.exchange(t, "udp", raw)); err != nil {
		t.Fatal(err)
	}
	ts.outcome(t)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
		t.Fatalf("rcode %s with %d answers, want NOERROR with 2", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if got, ok := nsidOf(t, &r); !ok || !bytes.Equal(got, nsidValue) {
		t.Errorf("NSID %q (present %v), want %q", got, ok, nsidValue)
	}
}

func TestNSIDOption(t *testing.T) {
	if nsidOption(nil) != nil {
		t.Error("an empty value turns NSID on")
	}
	if o := nsidOption(nsidValue); o == nil || o.Nsid != hex.EncodeToString(nsidValue) {
		t.Errorf("option %v for %q", o, nsidValue)
	}
}
