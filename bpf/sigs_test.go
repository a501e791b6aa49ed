package bpf_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/dnssec"
	"github.com/steadydns/steadydns/controlplane/presign"
	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/loader"
)

// upHealth is a health table of the entries listed up, never open.
type upHealth []uint32

func (h upHealth) Up(i uint32) bool { return i == 0 || slices.Contains(h, i) }
func (h upHealth) Open(uint8) bool  { return false }

// signedSet puts a signed multivalue set of addrs (checks 1, 2, …), two
// answers at a time, at name, and returns it as the presigner signs it.
func signedSet(t testing.TB, o *loader.Objects, name string, qtype uint16, s *dnssec.Signer, addrs ...string) presign.Set {
	t.Helper()
	var cs []cand
	var as []netip.Addr
	for i, a := range addrs {
		cs = append(cs, cand{addr: a, check: uint32(i + 1)})
		as = append(as, netip.MustParseAddr(a))
	}
	v := rrset(60, 2, cs...)
	v.TtlDegraded = 20
	v.Flags = uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED)
	put(t, o, name, qtype, v)
	return presign.Set{Name: name, Wire: wire(t, name), Type: qtype, Value: &bpf.Set{SteadydnsRrset: *v}, Addrs: as, Zone: s}
}

func zoneSigner(t testing.TB, zone string) (*dnssec.Signer, *dns.DNSKEY) {
	t.Helper()
	alg, _ := dnssec.Algorithm("ecdsap256sha256")
	keys, err := dnssec.Ensure(t.TempDir(), zone, alg, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner(zone, keys, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s, keys[0].DNSKEY
}

// TestSignedAnswers: a DO=1 query of a signed set is answered from XDP
// with the RRSIG of exactly the answers it holds, which verifies against
// the zone's key, with checksums that hold, for A and AAAA, with and
// without NSID, and for a signer's name of odd and even length (the
// OPT then falls on either half of the sum's words); DO=0 gets no RRSIG;
// after a health change, the answers follow it, still signed.
func TestSignedAnswers(t *testing.T) {
	for _, zone := range []string{"example.test.", "exampl.test."} {
		t.Run(zone, func(t *testing.T) {
			o := loadWith(t, loader.Options{NSID: []byte("edge-1")})
			s, key := zoneSigner(t, zone)
			sets := []presign.Set{
				signedSet(t, o, "www."+zone, dns.TypeA, s, "198.18.1.1", "198.18.1.2", "198.18.1.3"),
				signedSet(t, o, "www."+zone, dns.TypeAAAA, s, "fd53:1::1", "fd53:1::2", "fd53:1::3"),
			}
			health := upHealth{1, 2, 3}
			setHealth(t, o, health...)
			p, err := presign.New(o, &health, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			p.Configure(sets, nil)
			sync := func() {
				if _, err := p.Sync(time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			sync()
			check := func(t *testing.T, allowed []string, ttl uint32) {
				t.Helper()
				seen := map[string]bool{}
				for id := range 40 {
					for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
						for _, do := range []bool{true, false} {
							q := query("WwW."+zone, qt, func(m *dns.Msg) {
								m.Id = uint16(id * 7919)
								m.SetEdns0(1232, do)
								m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
							})
							in := packet.Build(frame(qt == dns.TypeAAAA, q, packet.Full))
							ret, out := run(t, o, in)
							if ret != 3 {
								t.Fatalf("%s do=%v: action %d, want XDP_TX", dns.TypeToString[qt], do, ret)
							}
							r, err := packet.Parse(out)
							if err != nil {
								t.Fatal(err)
							}
							var m dns.Msg
							if err := m.Unpack(r.Payload); err != nil {
								t.Fatalf("unpacking: %v", err)
							}
							var ans []dns.RR
							var sigs []*dns.RRSIG
							for _, rr := range m.Answer {
								if sig, ok := rr.(*dns.RRSIG); ok {
									sigs = append(sigs, sig)
								} else {
									ans = append(ans, rr)
									seen[rr.String()] = true
								}
							}
							if len(ans) != 2 || ans[0].Header().Ttl != ttl {
								t.Fatalf("answers %v, want 2 at TTL %d", ans, ttl)
							}
							for _, a := range ans {
								var ip string
								switch a := a.(type) {
								case *dns.A:
									ip = a.A.String()
								case *dns.AAAA:
									ip = a.AAAA.String()
								}
								// 198.18.1.N or fd53:1::N: candidate N.
								if !slices.Contains(allowed, ip[len(ip)-1:]) {
									t.Fatalf("answer %s not among %v", ip, allowed)
								}
							}
							if nsid := m.IsEdns0(); nsid == nil || len(nsid.Option) != 1 {
								t.Fatalf("OPT %v, want ours with NSID", m.IsEdns0())
							}
							if !do {
								if len(sigs) != 0 {
									t.Fatalf("DO=0 reply carries %d RRSIGs", len(sigs))
								}
								continue
							}
							if len(sigs) != 1 || !m.IsEdns0().Do() {
								t.Fatalf("DO=1 reply: %d RRSIGs, DO %v, want 1 and set\n%v", len(sigs), m.IsEdns0().Do(), &m)
							}
							if err := sigs[0].Verify(key, ans); err != nil {
								t.Fatalf("RRSIG does not verify over %v: %v", ans, err)
							}
							if !sigs[0].ValidityPeriod(time.Now()) {
								t.Fatal("RRSIG outside its validity period")
							}
						}
					}
				}
				if len(seen) < 2 {
					t.Errorf("only %d answers seen over 40 queries", len(seen))
				}
			}
			t.Run("all up", func(t *testing.T) { check(t, []string{"1", "2", "3"}, 60) })
			// One down: the other two, at the degraded TTL, once signed.
			health = upHealth{1, 3}
			setHealth(t, o, health...)
			sync()
			t.Run("one down", func(t *testing.T) { check(t, []string{"1", "3"}, 20) })
		})
	}
}

// TestUnsignedAnswerPasses: a DO=1 query whose answers have no signature
// yet (after a change, before the control plane signed) goes to the
// fallback untouched, counted as dnssec; DO=0 is answered.
func TestUnsignedAnswerPasses(t *testing.T) {
	o := load(t)
	s, _ := zoneSigner(t, "example.test.")
	set := signedSet(t, o, "www.example.test.", dns.TypeA, s, "198.18.1.1", "198.18.1.2")
	health := upHealth{1, 2}
	setHealth(t, o, health...)
	p, err := presign.New(o, &health, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Configure([]presign.Set{set}, nil)
	if _, err := p.Sync(time.Now()); err != nil {
		t.Fatal(err)
	}
	// Candidate 2 goes down in the data plane; nothing is signed for it.
	setHealth(t, o, 1)
	q := packet.Build(frame(false, query("www.example.test.", dns.TypeA, withOpt(1232, true)), packet.Full))
	before, _ := o.Outcomes()
	ret, out := run(t, o, q)
	if ret != 2 /* XDP_PASS */ || string(out) != string(q) {
		t.Fatalf("action %d, want XDP_PASS with the query untouched", ret)
	}
	after, _ := o.Outcomes()
	if d := after[bpf.SteadydnsOutcomeOUT_DNSSEC] - before[bpf.SteadydnsOutcomeOUT_DNSSEC]; d != 1 {
		t.Errorf("dnssec count grew by %d, want 1", d)
	}
	ret, _ = run(t, o, packet.Build(frame(false, query("www.example.test.", dns.TypeA, withOpt(1232, false)), packet.Full)))
	if ret != 3 {
		t.Errorf("DO=0: action %d, want XDP_TX", ret)
	}
}
