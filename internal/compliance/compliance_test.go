package compliance

import (
	"bytes"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func TestQueryBytes(t *testing.T) {
	c := Cases[slices.IndexFunc(Cases, func(c Case) bool { return c.Name == "optlist" })]
	raw, err := c.Query("example.test.", 0, 1).Pack()
	if err != nil {
		t.Fatal(err)
	}
	rdata := cat(optNSID, optECS, optExpire, optCookie)
	// The OPT closes the message: root, type 41, class 4096, TTL 0,
	// RDLENGTH, then the options exactly as genreport writes them.
	want := append([]byte{0, 0, 41, 0x10, 0x00, 0, 0, 0, 0, 0, byte(len(rdata))}, rdata...)
	if !bytes.HasSuffix(raw, want) || raw[11] != 1 {
		t.Errorf("optlist query %x, want it to end in %x", raw, want)
	}
	op := Cases[slices.IndexFunc(Cases, func(c Case) bool { return c.Name == "opcodeflg" })]
	raw, err = op.Query("example.test.", 0, 1).Pack()
	if err != nil {
		t.Fatal(err)
	}
	// Opcode 15, AA, TC, RD; RA, Z, AD, CD; no question, no OPT.
	if want := []byte{0, 1, 15<<3 | 0x07, 0xf0, 0, 0, 0, 0, 0, 0, 0, 0}; !bytes.Equal(raw, want) {
		t.Errorf("opcodeflg query %x, want %x", raw, want)
	}
	if len(Cases) != 33 {
		t.Errorf("%d cases, want genreport's 33", len(Cases))
	}
}

// fault is a way for a server to break one of genreport's rules.
type fault int

const (
	none        fault = iota
	echoFlags         // RD and CD echoed to an unknown opcode
	echoOptions       // the query's options echoed
	noBadvers         // EDNS version 1 answered as version 0
)

// serve runs a miekg/dns server for example.test. that answers as an
// authoritative server should, but for f.
func serve(t *testing.T, f fault) string {
	t.Helper()
	soa, err := dns.NewRR("example.test. 3600 IN SOA ns1.example.test. h.example.test. 1 2 3 4 5")
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := &dns.Msg{MsgHdr: dns.MsgHdr{Id: r.Id, Response: true, Opcode: r.Opcode}}
		if r.Opcode != dns.OpcodeQuery {
			m.Rcode = dns.RcodeNotImplemented
			if f == echoFlags {
				m.RecursionDesired, m.CheckingDisabled = r.RecursionDesired, r.CheckingDisabled
			}
			w.WriteMsg(m)
			return
		}
		m.Question, m.RecursionDesired, m.CheckingDisabled = r.Question, r.RecursionDesired, r.CheckingDisabled
		if o := r.IsEdns0(); o != nil {
			ro := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			ro.SetUDPSize(1232)
			if o.Do() {
				ro.SetDo()
			}
			if f == echoOptions {
				ro.Option = o.Option
			}
			m.Extra = []dns.RR{ro}
			if o.Version() != 0 && f != noBadvers {
				m.Rcode = dns.RcodeBadVers
				w.WriteMsg(m)
				return
			}
		}
		m.Authoritative = true
		if r.Question[0].Qtype == dns.TypeSOA {
			m.Answer = []dns.RR{soa}
		}
		w.WriteMsg(m)
	})
	accept := func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }
	pc, l := listenPair(t)
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h, MsgAcceptFunc: accept}, {Listener: l, Handler: h, MsgAcceptFunc: accept}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return pc.LocalAddr().String()
}

// listenPair binds UDP and TCP on one loopback port. The kernel picks the UDP
// port without looking at TCP, so another process may already hold that TCP
// port; another UDP port is then tried.
func listenPair(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 50 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("binding the UDP socket: %v", err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		pc.Close()
	}
	t.Fatal("binding UDP and TCP on one port: no free pair in 50 tries")
	return nil, nil
}

func TestChecks(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault fault
		// want maps each failing case to its tags; every other passes.
		want map[string][]string
	}{
		{"compliant", none, nil},
		{"flags echoed to an unknown opcode", echoFlags, map[string][]string{"opcodeflg": {"rd", "cd"}}},
		{"options echoed", echoOptions, map[string][]string{"ednsopt": {"echoed"}, "edns1opt": {"echoed"}}},
		{"no BADVERS", noBadvers, map[string][]string{
			"edns1": {"noerror", "badversion", "soa"}, "edns1opt": {"noerror", "badversion", "soa"}, "edns1do": {"noerror", "badversion", "soa"},
			"edns1nsid": {"noerror", "badversion", "soa"}, "edns1cookie": {"noerror", "badversion", "soa"},
			"edns1expire": {"noerror", "badversion", "soa"}, "edns1subnet": {"noerror", "badversion", "soa"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := serve(t, tt.fault)
			for _, r := range RunAll(addr, "example.test.", 0) {
				if r.Error != "" {
					t.Errorf("%s", r)
					continue
				}
				if want := tt.want[r.Case]; !slices.Equal(r.Tags, want) {
					t.Errorf("%s: tags %v, want %v", r.Case, r.Tags, want)
				}
			}
		})
	}
}
