package xdpprog_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/internal/xdptest"
	"github.com/steadydns/steadydns/loader"
)

// The fixtures below are a few of bpf's own test fixtures: the programs
// here are checked against the server's program and its maps.

var (
	server4, server6 = xdptest.Server4, xdptest.Server6

	wire       = xdptest.Wire
	query      = xdptest.Query
	frame      = xdptest.Frame
	runProgram = xdptest.Run

	label63 = strings.Repeat("a", 63)
	// 3 labels of 63 bytes and one of 61: 3*64 + 62 + 1 = 255 wire bytes.
	name255 = label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61) + "."
)

// testHealth is the health table's capacity in load.
const testHealth = xdptest.HealthCapacity

// load loads the server's program into a private bpffs.
func load(t testing.TB) *loader.Objects {
	t.Helper()
	return xdptest.Load(t, loader.Options{})
}

// fixtures fills the record table with the sets the stage test asks for.
// No health table is pushed: a table not yet pushed answers every
// candidate, as if all were up.
func fixtures(t *testing.T, o *loader.Objects) {
	put(t, o, "www.example.test.", dns.TypeA, rrset(30, 8, "198.18.1.1", "198.18.1.2", "198.18.1.3"))
	put(t, o, "www.example.test.", dns.TypeAAAA, rrset(30, 8, "fd53:1::1", "fd53:1::2"))
	put(t, o, name255, dns.TypeAAAA, rrset(300, 8, "fd53:2::255"))
}

// rrset is a set of the addresses, each with a check of its own.
func rrset(ttl uint32, maxAnswers uint8, addrs ...string) *bpf.SteadydnsRrset {
	v := &bpf.SteadydnsRrset{Ttl: ttl, N: uint8(len(addrs)), MaxAnswers: maxAnswers}
	for i, s := range addrs {
		a := netip.MustParseAddr(s)
		if a.Is4() {
			b := a.As4()
			copy(v.Cand[i].Addr[:], b[:])
		} else {
			v.Cand[i].Addr = a.As16()
		}
		v.Cand[i].Check = uint32(i + 1)
	}
	return v
}

func put(t testing.TB, o *loader.Objects, name string, qtype uint16, v *bpf.SteadydnsRrset) {
	t.Helper()
	if err := o.PutRecord(loader.RecordKey{Wire: wire(t, name), Qtype: qtype}, v); err != nil {
		t.Fatal(err)
	}
}

func withOpt(size uint16, do bool) func(*dns.Msg) {
	return func(m *dns.Msg) { m.SetEdns0(size, do) }
}
