package bpf_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/dnssec"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/presign"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/zone"
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

const signedNoDataConfig = `server:
  listen: ["127.0.0.1:53"]
zones:
  - origin: example.test.
    file: z.zone
health_checks:
  c1: { type: tcp, target: 198.18.1.1, port: 80 }
  c2: { type: tcp, target: 198.18.1.2, port: 80 }
  c3: { type: tcp, target: 198.18.1.3, port: 80 }
records:
  - name: www.example.test.
    type: A
    when_all_down: nodata
    answers: [{value: 198.18.1.1, check: c1}, {value: 198.18.1.2, check: c2}]
  - name: www.example.test.
    type: AAAA
    answers: [{value: "fd53:1::1", check: c3}]
`

// TestSignedNoData: with every candidate of a signed set down and
// when_all_down nodata, a DO=1 query gets from XDP the NODATA the
// fallback answers: the SOA, the NSEC at the query's name (its bitmap
// the name's other types) and their RRSIGs, which verify against the
// zone's key, with lengths and checksums that hold; before the control
// plane signed it, the query passes; DO=0 gets the unsigned NODATA.
func TestSignedNoData(t *testing.T) {
	o := load(t)
	s, key := zoneSigner(t, "example.test.")
	sv := serveSigned(t, o, signedNoDataConfig, policyZone+"www TXT \"v=1\"\n", s)
	setHealth(t, o, sv.index["c3"])
	var sets []presign.Set
	for _, set := range sv.comp.Sets {
		if v := set.Data(new(bpf.Set)); v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED) != 0 && !set.Fallback {
			sets = append(sets, presign.Set{Name: set.Name, Wire: records.Wire(set.Name), Type: set.Type, Value: v, Addrs: set.Addrs(), Zone: sv.zone,
				NoData: func() []dns.RR { return sv.zone.NoData(set.Name, set.Type) }})
		}
	}
	if len(sets) != 3 { // www's A and AAAA, and the zone file's ns1 A
		t.Fatalf("%d signed sets, want 3", len(sets))
	}
	p, err := presign.New(o, mapHealth{o}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Configure(sets, nil)

	srv := fallback.New(fallback.Options{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}},
		&fallback.View{Zones: zone.NewZones(sv.zone), Records: records.NewAnswerer(sv.comp, mapHealth{o}, sv.geo)})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})

	ask := func(do bool) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("wWw.example.test.", dns.TypeA)
		m.Id = 0x1234
		withOpt(1232, do)(m)
		return m
	}
	xdp := func(do bool) (uint32, *dns.Msg) {
		q, err := ask(do).Pack()
		if err != nil {
			t.Fatal(err)
		}
		ret, out := run(t, o, packet.Build(frame(false, q, packet.Full)))
		if ret != 3 {
			return ret, nil
		}
		r, err := packet.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		var m dns.Msg
		if err := m.Unpack(r.Payload); err != nil {
			t.Fatalf("unpacking: %v", err)
		}
		return ret, &m
	}

	before, _ := o.Outcomes()
	if ret, _ := xdp(true); ret != 2 {
		t.Fatalf("DO=1 before signing: action %d, want XDP_PASS", ret)
	}
	if _, err := p.Sync(time.Now()); err != nil {
		t.Fatal(err)
	}
	_, got := xdp(true)
	if got == nil {
		t.Fatal("DO=1 NODATA passed once signed")
	}
	after, _ := o.Outcomes()
	if d := after[bpf.SteadydnsOutcomeOUT_NODATA] - before[bpf.SteadydnsOutcomeOUT_NODATA]; d != 1 {
		t.Errorf("nodata count grew by %d, want 1", d)
	}
	want, err := dns.Exchange(ask(true), srv.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Rcode != dns.RcodeSuccess || !got.Authoritative || len(got.Answer) != 0 || !got.IsEdns0().Do() {
		t.Fatalf("XDP's reply is not a DO=1 NODATA:\n%v", got)
	}
	if got.Rcode != want.Rcode || got.Authoritative != want.Authoritative || len(got.Answer) != len(want.Answer) {
		t.Fatalf("XDP's header differs from the fallback's:\n%v\n%v", got, want)
	}
	// The same records, the signatures' bytes apart.
	norm := func(rrs []dns.RR) []string {
		var out []string
		for _, rr := range rrs {
			rr = dns.Copy(rr)
			if sig, ok := rr.(*dns.RRSIG); ok {
				sig.Signature = ""
			}
			out = append(out, strings.ToLower(rr.String()))
		}
		return out
	}
	if g, w := norm(got.Ns), norm(want.Ns); !slices.Equal(g, w) {
		t.Fatalf("authority from XDP:\n%s\nfrom the fallback:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	var nsec *dns.NSEC
	bySet := map[uint16][]dns.RR{}
	for _, rr := range got.Ns {
		if n, ok := rr.(*dns.NSEC); ok {
			nsec = n
		}
		if _, ok := rr.(*dns.RRSIG); !ok {
			bySet[rr.Header().Rrtype] = append(bySet[rr.Header().Rrtype], rr)
		}
	}
	if nsec == nil || !slices.Equal(nsec.TypeBitMap, []uint16{dns.TypeTXT, dns.TypeAAAA, dns.TypeRRSIG, dns.TypeNSEC}) || nsec.NextDomain != `\000.www.example.test.` {
		t.Fatalf("NSEC %v, want www's other types and next name \\000.www", nsec)
	}
	verified := 0
	for _, rr := range got.Ns {
		if sig, ok := rr.(*dns.RRSIG); ok {
			if err := sig.Verify(key, bySet[sig.TypeCovered]); err != nil {
				t.Fatalf("RRSIG over %s does not verify: %v", dns.TypeToString[sig.TypeCovered], err)
			}
			verified++
		}
	}
	if verified != 2 || len(bySet[dns.TypeSOA]) != 1 {
		t.Fatalf("%d RRSIGs verified, %d SOAs; want 2 and 1", verified, len(bySet[dns.TypeSOA]))
	}
	_, plain := xdp(false)
	if plain == nil || len(plain.Ns) != 1 || plain.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("DO=0: %v, want NODATA with the SOA alone", plain)
	}
}
