package presign

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/loader"
)

// mapStore is a Store in memory.
type mapStore struct {
	epoch uint32
	m     map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue
}

func (s *mapStore) PutSig(k bpf.SteadydnsSigKey, v *bpf.SteadydnsSigValue) error {
	s.m[k] = *v
	return nil
}
func (s *mapStore) DeleteSig(k bpf.SteadydnsSigKey) error { delete(s.m, k); return nil }
func (s *mapStore) CurrentSigEpoch() (uint32, error)      { return s.epoch, nil }
func (s *mapStore) SetSigEpoch(e uint32) error            { s.epoch = e; return nil }
func (s *mapStore) SigKeys() ([]bpf.SteadydnsSigKey, error) {
	var out []bpf.SteadydnsSigKey
	for k := range s.m {
		out = append(out, k)
	}
	return out, nil
}

// live are the entries of the epoch the program reads.
func (s *mapStore) live() map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue {
	out := map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}
	for k, v := range s.m {
		if k.Epoch == s.epoch {
			out[k] = v
		}
	}
	return out
}

type health []bool // by check

func (h health) Up(i uint32) bool { return h[i] }
func (h health) Open(uint8) bool  { return false }

// fakeSigner makes an RRSIG whose signature is its generation and the
// number of records signed, so that a test sees what was signed when.
type fakeSigner struct{ gen byte }

func (f *fakeSigner) Sign(rrs []dns.RR) ([]dns.RR, error) {
	return []dns.RR{&dns.RRSIG{Hdr: dns.RR_Header{Name: rrs[0].Header().Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: rrs[0].Header().Ttl},
		TypeCovered: rrs[0].Header().Rrtype, Algorithm: 13, Labels: 3, OrigTtl: rrs[0].Header().Ttl, Expiration: 2, Inception: 1, KeyTag: 7,
		SignerName: "example.test.", Signature: "AQID" + string("ABCDEFGH"[f.gen%8]) + string("ABCDEFGH"[len(rrs)%8]) + "==",
	}}, nil
}

func set(policy bpf.SteadydnsPolicy, maxAnswers uint8, addrs ...string) Set {
	s := Set{Name: "www.example.test.", Wire: "\x03www\x07example\x04test\x00", Type: dns.TypeA, Value: &bpf.Set{}}
	v := &s.Value.SteadydnsRrset
	v.Ttl, v.TtlDegraded, v.N, v.MaxAnswers, v.Policy = 60, 20, uint8(len(addrs)), maxAnswers, uint8(policy)
	v.Flags = uint8(bpf.SteadydnsRrsetFlagsRR_SIGNED)
	for i, a := range addrs {
		ip := netip.MustParseAddr(a)
		s.Addrs = append(s.Addrs, ip)
		b := ip.As4()
		copy(v.Cand[i].Addr[:], b[:])
		v.Cand[i].Check = uint32(i + 1)
		v.Cand[i].Weight = 1
	}
	return s
}

// key is the live key of the answers at ttl.
func key(st *mapStore, s Set, ttl uint32, idx ...int) bpf.SteadydnsSigKey {
	k := bpf.SteadydnsSigKey{Hash: loader.NameHash(s.Wire, s.Type), Ttl: ttl, Epoch: st.epoch}
	for _, i := range idx {
		k.Content += loader.AnswerContent(s.Type, addr16(s.Addrs[i]))
	}
	return k
}

func keysOf(m map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue) []bpf.SteadydnsSigKey {
	var out []bpf.SteadydnsSigKey
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sameKeys(t *testing.T, what string, got map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue, want ...bpf.SteadydnsSigKey) {
	t.Helper()
	g := keysOf(got)
	cmp := func(a, b bpf.SteadydnsSigKey) int {
		if a.Content != b.Content {
			return map[bool]int{true: -1, false: 1}[a.Content < b.Content]
		}
		return int(a.Ttl) - int(b.Ttl)
	}
	slices.SortFunc(g, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(g, want) {
		t.Fatalf("%s: entries %+v, want %+v", what, g, want)
	}
}

// TestSync: a multivalue set of three, two at a time, has one entry per
// window at full health, plus the open table's (the same); a candidate
// down gives the windows of the other two at the degraded TTL, and the
// ones no longer wanted stay for Grace, then go; a signature the signer
// makes anew moves every entry to a new epoch.
func TestSync(t *testing.T) {
	st := &mapStore{epoch: 5, m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{{Epoch: 5, Hash: 1}: {}}}
	h := health{true, true, true, true}
	p, err := New(st, &h, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	s := set(bpf.SteadydnsPolicyPOLICY_MULTIVALUE, 2, "198.18.1.1", "198.18.1.2", "198.18.1.3")
	signer := &fakeSigner{}
	s.Zone = signer
	p.Configure([]Set{s}, nil)
	t0 := time.Unix(100, 0)
	stats, err := p.Sync(t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.epoch != 6 {
		t.Fatalf("epoch %d after the first sync, want 6: a new process writes its own", st.epoch)
	}
	full := []bpf.SteadydnsSigKey{key(st, s, 60, 0, 1), key(st, s, 60, 1, 2), key(st, s, 60, 0, 2)}
	sameKeys(t, "full health", st.live(), full...)
	if stats.Written != 3 || stats.Outcomes != 3 {
		t.Fatalf("stats %+v, want 3 outcomes written", stats)
	}
	// The earlier process's entry goes once its grace is over.
	if _, err := p.Sync(t0.Add(Grace)); err != nil {
		t.Fatal(err)
	}
	if len(st.m) != 3 {
		t.Fatalf("%d entries after the grace, want the 3 live", len(st.m))
	}

	h[2] = false // candidate 1 down
	stats, err = p.Sync(t0.Add(2 * Grace))
	if err != nil {
		t.Fatal(err)
	}
	// At this health 0+2 at the degraded TTL; open, the three full windows.
	down := key(st, s, 20, 0, 2)
	sameKeys(t, "one down", st.live(), append(slices.Clone(full), down)...)
	if stats.Written != 1 {
		t.Fatalf("wrote %d, want the 1 new", stats.Written)
	}

	// The signer renews its signatures: every entry moves to a new epoch,
	// and the old ones go after the grace.
	signer.gen++
	if _, err := p.Sync(t0.Add(3 * Grace)); err != nil {
		t.Fatal(err)
	}
	if st.epoch != 7 {
		t.Fatalf("epoch %d after new signatures, want 7", st.epoch)
	}
	if len(st.live()) != 4 || len(st.m) != 8 {
		t.Fatalf("%d live of %d entries, want 4 live and the 4 old kept for their grace", len(st.live()), len(st.m))
	}
	if _, err := p.Sync(t0.Add(4 * Grace)); err != nil {
		t.Fatal(err)
	}
	if len(st.m) != 4 {
		t.Fatalf("%d entries after the grace, want 4", len(st.m))
	}
}

// TestSyncPolicies: the entries each policy needs at one health.
func TestSyncPolicies(t *testing.T) {
	addrs := []string{"198.18.1.1", "198.18.1.2", "198.18.1.3", "198.18.1.4"}
	cases := []struct {
		name   string
		policy bpf.SteadydnsPolicy
		max    uint8
		want   [][]int // candidates per entry at the degraded TTL (candidate 3 down)
	}{
		{"multivalue windows", bpf.SteadydnsPolicyPOLICY_MULTIVALUE, 2, [][]int{{0, 1}, {1, 2}, {0, 2}}},
		{"round robin windows", bpf.SteadydnsPolicyPOLICY_ROUND_ROBIN, 2, [][]int{{0, 1}, {1, 2}, {0, 2}}},
		{"weighted each", bpf.SteadydnsPolicyPOLICY_WEIGHTED, 4, [][]int{{0}, {1}, {2}}},
		{"failover lowest level", bpf.SteadydnsPolicyPOLICY_FAILOVER, 4, [][]int{{0, 1, 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &mapStore{m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}}
			h := health{true, true, true, true, false}
			p, err := New(st, &h, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			s := set(c.policy, c.max, addrs...)
			s.Zone = &fakeSigner{}
			p.Configure([]Set{s}, nil)
			if _, err := p.Sync(time.Unix(1, 0)); err != nil {
				t.Fatal(err)
			}
			var want []bpf.SteadydnsSigKey
			for _, w := range c.want {
				want = append(want, key(st, s, 20, w...))
			}
			// Open: every candidate up, at the TTL.
			var open stOpen
			open.add(st, s, c.policy, c.max, len(addrs))
			sameKeys(t, c.name, st.live(), append(want, open.keys...)...)
		})
	}
}

// stOpen lists the entries of the open table: every candidate up.
type stOpen struct{ keys []bpf.SteadydnsSigKey }

func (o *stOpen) add(st *mapStore, s Set, policy bpf.SteadydnsPolicy, max uint8, n int) {
	switch policy {
	case bpf.SteadydnsPolicyPOLICY_FAILOVER:
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		o.keys = append(o.keys, key(st, s, 60, all[:min(n, int(max))]...))
	case bpf.SteadydnsPolicyPOLICY_WEIGHTED:
		for i := range n {
			o.keys = append(o.keys, key(st, s, 60, i))
		}
	default:
		for i := range n {
			var w []int
			for j := range int(max) {
				w = append(w, (i+j)%n)
			}
			o.keys = append(o.keys, key(st, s, 60, w...))
		}
	}
}

// TestEncode: each RRSIG as the program appends it, its owner a pointer
// to the question, and the sum of its bytes.
func TestEncode(t *testing.T) {
	sigs, _ := (&fakeSigner{}).Sign([]dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "www.example.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}}})
	v, ok := Encode(append(sigs, sigs...))
	if !ok {
		t.Fatal("not encoded")
	}
	buf := make([]byte, 512)
	end, _ := dns.PackRR(sigs[0], buf, 0, nil, false)
	one := append([]byte{0xc0, 0x0c}, buf[18:end]...) // past the 18-byte owner
	if want := append(slices.Clone(one), one...); v.Count != 2 || !slices.Equal(v.Rr[:v.Len], want) {
		t.Fatalf("encoded %d records %x, want 2 %x", v.Count, v.Rr[:v.Len], want)
	}
	if v.Sum != loader.SigSum(v.Rr[:v.Len]) {
		t.Fatal("sum differs")
	}
	long := sigs[0].(*dns.RRSIG)
	long.SignerName = "a.very.long.name.that.does.not.fit.twice.in.the.room.an.entry.has.for.signatures.example.test."
	long.Signature = string(slices.Repeat([]byte("QUFB"), 100))
	if _, ok := Encode([]dns.RR{long, long}); ok {
		t.Fatal("records longer than an entry holds were encoded")
	}
}

// TestEncodeNoData: each owner becomes a pointer into the question's
// name (the name itself at 12, the zone's name where it starts in it),
// the rest as packed; an owner outside the name is refused.
func TestEncodeNoData(t *testing.T) {
	wire := "\x03www\x07example\x04test\x00"
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 120},
		Ns: "ns1.example.test.", Mbox: "hostmaster.example.test.", Serial: 1, Minttl: 120}
	nsec := &dns.NSEC{Hdr: dns.RR_Header{Name: "WWW.example.test.", Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: 120},
		NextDomain: `\000.www.example.test.`, TypeBitMap: []uint16{dns.TypeRRSIG, dns.TypeNSEC}}
	v, ok := EncodeNoData([]dns.RR{soa, nsec}, wire)
	if !ok || v.Count != 2 {
		t.Fatalf("encoded %v, %d records; want 2", ok, v.Count)
	}
	// The message as the program writes it: header, question, authority.
	msg := append([]byte("\x12\x34\x84\x00\x00\x01\x00\x00\x00\x02\x00\x00"+wire+"\x00\x01\x00\x01"), v.Rr[:v.Len]...)
	if v.Rr[0] != 0xc0 || v.Rr[1] != 12+4 {
		t.Errorf("SOA owner % x, want a pointer to offset 16", v.Rr[:2])
	}
	var m dns.Msg
	if err := m.Unpack(msg); err != nil {
		t.Fatal(err)
	}
	if len(m.Ns) != 2 || m.Ns[0].String() != soa.String() || !strings.EqualFold(m.Ns[1].String(), nsec.String()) {
		t.Fatalf("unpacked %v, want %v and %v", m.Ns, soa, nsec)
	}
	if v.Sum != loader.SigSum(v.Rr[:v.Len]) {
		t.Error("sum does not match the records")
	}
	other := dns.Copy(soa)
	other.Header().Name = "other.test."
	if _, ok := EncodeNoData([]dns.RR{other}, wire); ok {
		t.Error("an owner outside the question's name was encoded")
	}
}
