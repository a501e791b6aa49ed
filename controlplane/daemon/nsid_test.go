package daemon_test

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

// withNSIDQuery adds OPT with an empty NSID option to m, as `dig +nsid`
// sends it.
func withNSIDQuery(m *dns.Msg) *dns.Msg {
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	return m
}

// replyNSID returns the reply's NSID value, and whether it has one.
func replyNSID(t *testing.T, r *dns.Msg) (string, bool) {
	t.Helper()
	opt := r.IsEdns0()
	if opt == nil {
		return "", false
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_NSID); ok {
			b, err := hex.DecodeString(e.Nsid)
			if err != nil {
				t.Fatalf("nsid %q: %v", e.Nsid, err)
			}
			return string(b), true
		}
	}
	return "", false
}

// TestNSIDOverTheWire: with server.nsid set, XDP's A and AAAA answers and
// the fallback's MX and SOA carry it when the query asks, and only then;
// with it unset, no reply carries it.
func TestNSIDOverTheWire(t *testing.T) {
	v4, v6 := "198.18.0.2:53", "[fd53::2]:53"
	type ask struct {
		name, server, net string
		m                 *dns.Msg
		xdp               bool // answered by XDP, else by the fallback
		want              bool // carries the NSID
	}
	run := func(t *testing.T, nsid string, asks []ask) {
		env := testenv.Start(t, testenv.Options{})
		e := serve(t, env, func(link, pins string) string {
			cfg := fmt.Sprintf(configFile, link, "native", pins)
			if nsid != "" {
				cfg = strings.Replace(cfg, "server:\n", "server:\n  nsid: "+nsid+"\n", 1)
			}
			return cfg
		})
		for _, a := range asks {
			x0, f0 := e.paths(t)
			r := e.ask(t, a.net, a.server, a.m)
			x1, f1 := e.paths(t)
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
				t.Errorf("%s: rcode %s with %d answers", a.name, dns.RcodeToString[r.Rcode], len(r.Answer))
			}
			if a.xdp && (x1 != x0+1 || f1 != f0) || !a.xdp && (x1 != x0 || f1 != f0+1) {
				t.Errorf("%s: xdp counter moved %d, fallback %d; want it answered by xdp: %v", a.name, x1-x0, f1-f0, a.xdp)
			}
			got, ok := replyNSID(t, r)
			if ok != a.want || a.want && got != "edge-ams-1" {
				t.Errorf("%s: NSID %q (present %v), want present %v", a.name, got, ok, a.want)
			}
		}
	}
	t.Run("set", func(t *testing.T) {
		run(t, "edge-ams-1", []ask{
			{"A over ipv4 by xdp", v4, "udp", withNSIDQuery(q("www.example.test.", dns.TypeA)), true, true},
			{"AAAA over ipv6 by xdp", v6, "udp", withNSIDQuery(q("WWW.example.test.", dns.TypeAAAA)), true, true},
			{"static A by xdp", v6, "udp", withNSIDQuery(q("static.example.test.", dns.TypeA)), true, true},
			{"A by xdp, not asked", v4, "udp", withEDNS(q("www.example.test.", dns.TypeA)), true, false},
			{"A by xdp, no OPT", v4, "udp", q("www.example.test.", dns.TypeA), true, false},
			{"MX by the fallback", v4, "udp", withNSIDQuery(q("example.test.", dns.TypeMX)), false, true},
			{"SOA by the fallback over tcp", v6, "tcp", withNSIDQuery(q("example.test.", dns.TypeSOA)), false, true},
			{"MX by the fallback, not asked", v4, "udp", withEDNS(q("example.test.", dns.TypeMX)), false, false},
		})
	})
	t.Run("unset", func(t *testing.T) {
		run(t, "", []ask{
			{"A by xdp", v4, "udp", withNSIDQuery(q("www.example.test.", dns.TypeA)), true, false},
			{"MX by the fallback", v4, "udp", withNSIDQuery(q("example.test.", dns.TypeMX)), false, false},
			{"SOA by the fallback", v6, "udp", withNSIDQuery(q("example.test.", dns.TypeSOA)), false, false},
		})
	})
}

func withEDNS(m *dns.Msg) *dns.Msg {
	m.SetEdns0(1232, false)
	return m
}
