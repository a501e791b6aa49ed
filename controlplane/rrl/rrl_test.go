package rrl_test

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/rrl"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

var (
	server = netip.MustParseAddr("198.18.0.2")
	opts   = loader.RRL{Rate: 3, Slip: 2, Window: time.Minute, IPv4Prefix: 24, IPv6Prefix: 56}
)

func load(t *testing.T) *loader.Objects {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("running xdp programs needs root (running as uid %d)", os.Geteuid())
	}
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	o, err := loader.Load(loader.Options{BPFFS: dir + "/sd", HealthCapacity: 64, Servers: []netip.Addr{server}, RRL: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// TestSameKeyAsXDP: the fallback's key for a reply (Resp of what the
// handler reports, with the client's prefix) is the entry the XDP program
// wrote answering the same question, however the name is spelled.
func TestSameKeyAsXDP(t *testing.T) {
	o := load(t)
	var v bpf.SteadydnsRrset
	v.Ttl, v.N, v.MaxAnswers = 30, 1, 1
	copy(v.Cand[0].Addr[:], []byte{198, 18, 1, 1})
	if err := o.PutRecord(loader.RecordKey{Wire: "\x03www\x07example\x04test\x00", Qtype: dns.TypeA}, &v); err != nil {
		t.Fatal(err)
	}
	table := make([]byte, healthtable.Bytes(o.HealthCapacity()))
	healthtable.Put(table, 0, true, 0)
	if _, err := o.PushHealth(table, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("wWw.EXAMPLE.test.", dns.TypeA)
	q, _ := m.Pack()
	client := netip.MustParseAddr("198.18.0.77")
	in := packet.Build(packet.Frame{Src: netip.AddrPortFrom(client, 40000), Dst: netip.AddrPortFrom(server, 53), Payload: q, Checksum: packet.Full})
	if ret, err := o.Steadydns.Run(&ebpf.RunOptions{Data: in, DataOut: make([]byte, 4096)}); err != nil || ret != 3 {
		t.Fatalf("xdp: action %d, %v; want XDP_TX", ret, err)
	}
	for _, name := range []string{"wWw.EXAMPLE.test.", "www.example.test.", "WWW.EXAMPLE.TEST"} {
		if _, ok := o.RRLTat(netip.MustParseAddr("198.18.0.200"), rrl.Resp(fallback.Reply{Qname: name, Qtype: dns.TypeA})); !ok {
			t.Errorf("%s: no account under the fallback's key", name)
		}
	}
}

// TestResp: what a reply is keyed by besides the prefix.
func TestResp(t *testing.T) {
	www := rrl.Resp(fallback.Reply{Qname: "www.example.test.", Qtype: dns.TypeA})
	for _, c := range []struct {
		name string
		r    fallback.Reply
		want uint64
	}{
		{"answer, case folded", fallback.Reply{Qname: "WWW.Example.Test.", Qtype: dns.TypeA}, www},
		{"answer, another type", fallback.Reply{Qname: "www.example.test.", Qtype: dns.TypeMX}, loader.RRLAnswer("\x03www\x07example\x04test\x00", dns.TypeMX)},
		{"nxdomain: the zone", fallback.Reply{Qname: "nope.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Zone: "example.test."}, loader.RRLNXDomain("\x07example\x04test\x00")},
		{"nxdomain, another name, one key", fallback.Reply{Qname: "x1.example.test.", Qtype: dns.TypeTXT, Rcode: dns.RcodeNameError, Zone: "example.test."}, loader.RRLNXDomain("\x07example\x04test\x00")},
		{"refused: the rcode", fallback.Reply{Qname: "other.test.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused}, loader.RRLError(dns.RcodeRefused)},
		{"formerr without a question", fallback.Reply{Rcode: dns.RcodeFormatError}, loader.RRLError(dns.RcodeFormatError)},
	} {
		if got := rrl.Resp(c.r); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

// fakeAccounts returns the verdicts in order.
type fakeAccounts []loader.RRLVerdict

func (f *fakeAccounts) RRLAccount(netip.Addr, uint64, uint64) loader.RRLVerdict {
	v := (*f)[0]
	*f = (*f)[1:]
	return v
}

// TestLimiter: the loader's verdicts become the fallback's.
func TestLimiter(t *testing.T) {
	a := &fakeAccounts{loader.RRLSend, loader.RRLSlip, loader.RRLDrop}
	l := rrl.New(a)
	for _, want := range []fallback.Verdict{fallback.Send, fallback.Slip, fallback.Drop} {
		if got := l.Limit(netip.MustParseAddr("198.18.0.1"), fallback.Reply{}); got != want {
			t.Errorf("verdict %v, want %v", got, want)
		}
	}
}

// TestOptionsDefault: a config without server.rrl loads the program with
// rate limiting on, at the default rate; rate 0 loads it off.
func TestOptionsDefault(t *testing.T) {
	for _, c := range []struct {
		yaml string
		rate int
	}{
		{"", 200},
		{"  rrl: {slip: 0}\n", 200},
		{"  rrl: {rate: 0}\n", 0},
	} {
		cfg, err := config.Parse("config.yaml", []byte("server:\n  listen: [\"198.18.0.2:53\"]\n"+c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := rrl.Options(cfg.Server.RRL); got.Rate != c.rate {
			t.Errorf("server section %q: loader rate %d, want %d", c.yaml, got.Rate, c.rate)
		}
	}
}
