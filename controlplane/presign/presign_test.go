package presign

import (
	"cmp"
	"fmt"
	"maps"
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
// number of records signed, so that a test sees what was signed when. It
// counts its signatures, and renews them at refresh and rekey.
type fakeSigner struct {
	gen            byte
	signed         int
	refresh, rekey time.Time
}

func (f *fakeSigner) Renews([]dns.RR) (time.Time, time.Time) { return f.refresh, f.rekey }

func (f *fakeSigner) Sign(rrs []dns.RR) ([]dns.RR, error) {
	f.signed++
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

// sets are n multivalue sets of three, two at a time, each with checks
// of its own (set i's candidate j reads entry 3i+j+1), signed by zone.
func sets(n int, zone Signer) []Set {
	out := make([]Set, n)
	for i := range out {
		s := set(bpf.SteadydnsPolicyPOLICY_MULTIVALUE, 2, "198.18.1.1", "198.18.1.2", "198.18.1.3")
		s.Name = fmt.Sprintf("s%d.example.test.", i)
		s.Wire = string(append([]byte{byte(len(fmt.Sprint(i)) + 1), 's'}, fmt.Sprintf("%d\x07example\x04test\x00", i)...))
		for j := range 3 {
			s.Value.Cand[j].Check = uint32(3*i + j + 1)
		}
		s.Zone = zone
		out[i] = s
	}
	return out
}

// upAll is a health table of n sets' checks, all up.
func upAll(n int) health {
	h := make(health, 3*n+1)
	for i := range h {
		h[i] = true
	}
	return h
}

// TestUpdateIdle: with nothing changed, updates (one per pushed table)
// walk no set and sign nothing, and name no time to wake; a health entry
// that changes walks the one set that reads it, whose one new answer set
// is written beside the others, untouched.
func TestUpdateIdle(t *testing.T) {
	const n = 200
	st := &mapStore{m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}}
	h := upAll(n)
	p, err := New(st, &h, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	signer := &fakeSigner{}
	ss := sets(n, signer)
	p.Configure(ss, nil)
	t0 := time.Unix(100, 0)
	stats, err := p.Update(t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Walked != n || stats.Written != 3*n || signer.signed != 3*n {
		t.Fatalf("first update: %+v, %d signed; want %d sets walked, %d written and signed", stats, signer.signed, n, 3*n)
	}
	signer.signed = 0
	for sec := range 600 {
		stats, err := p.Update(t0.Add(time.Duration(sec+1)*time.Second), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Walked != 0 || stats.Outcomes != 0 || stats.Written+stats.Removed != 0 || !stats.Next.IsZero() {
			t.Fatalf("idle second %d: %+v, want nothing walked, written or removed, and no time to wake", sec, stats)
		}
	}
	if signer.signed != 0 {
		t.Fatalf("%d signatures asked for in 600 idle seconds, want 0", signer.signed)
	}

	before := maps.Clone(st.m)
	h[3*7+2] = false // set 7's candidate 1
	stats, err = p.Update(t0.Add(601*time.Second), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Set 7's four answer sets: the open table's three windows, and 0+2
	// at the degraded TTL, the one new.
	if stats.Walked != 1 || stats.Outcomes != 4 || signer.signed != 4 || stats.Written != 1 || stats.Removed != 0 {
		t.Fatalf("after one change: %+v, %d signed; want set 7 walked, its 4 answer sets signed and 1 written", stats, signer.signed)
	}
	added := key(st, ss[7], 20, 0, 2)
	after := maps.Clone(st.m)
	if _, ok := after[added]; !ok {
		t.Fatalf("no entry %+v for set 7's answers at the new health", added)
	}
	delete(after, added)
	if !maps.Equal(before, after) {
		t.Fatal("entries other than the new one changed")
	}
}

// TestUpdateRenews: an update wakes at the signatures' refresh, batch
// later, and walks every set due by then, whose new signatures move the
// epoch; a key event wakes it at once and walks only its signer's sets.
func TestUpdateRenews(t *testing.T) {
	st := &mapStore{m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}}
	h := upAll(4)
	p, err := New(st, &h, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 0)
	a := &fakeSigner{refresh: t0.Add(time.Hour)}
	b := &fakeSigner{refresh: t0.Add(time.Hour + time.Minute), rekey: t0.Add(30 * time.Minute)}
	ss := sets(4, a)
	ss[2].Zone, ss[3].Zone = b, b
	p.Configure(ss, nil)
	const batch = 10 * time.Minute
	stats, err := p.Update(t0, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !stats.Next.Equal(b.rekey) {
		t.Fatalf("next %v, want b's key event %v", stats.Next, b.rekey)
	}
	// b's key event: its two sets, signed anew.
	b.gen++
	b.rekey = time.Time{}
	a.signed, b.signed = 0, 0
	stats, err = p.Update(t0.Add(30*time.Minute), batch)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Walked != 2 || a.signed != 0 || b.signed != 6 || st.epoch != 2 {
		t.Fatalf("at the key event: %+v, a signed %d, b %d, epoch %d; want b's 2 sets walked, 6 signed, epoch 2", stats, a.signed, b.signed, st.epoch)
	}
	if want := t0.Add(30*time.Minute + Grace); !stats.Next.Equal(want) {
		t.Fatalf("next %v, want the old epoch's removal %v", stats.Next, want)
	}
	if stats, err = p.Update(t0.Add(30*time.Minute+Grace), batch); err != nil || stats.Removed != 12 {
		t.Fatalf("removed %d (%v), want the old epoch's 12", stats.Removed, err)
	}
	if want := t0.Add(time.Hour + batch); !stats.Next.Equal(want) {
		t.Fatalf("next %v, want the first refresh, batch later: %v", stats.Next, want)
	}
	// Just before: nothing. Then both signers' sets are due.
	if stats, err = p.Update(t0.Add(time.Hour+batch-time.Second), batch); err != nil || stats.Walked != 0 {
		t.Fatalf("before the batch: walked %d (%v), want 0", stats.Walked, err)
	}
	a.gen++
	b.gen++
	a.refresh, b.refresh = t0.Add(48*time.Hour), t0.Add(48*time.Hour)
	if stats, err = p.Update(t0.Add(time.Hour+batch), batch); err != nil || stats.Walked != 4 || st.epoch != 3 || len(st.live()) != 12 {
		t.Fatalf("at the batch: %+v (%v), epoch %d, %d live; want 4 walked, one move to epoch 3, 12 live", stats, err, st.epoch, len(st.live()))
	}
}

// TestConfigureChanges: a new config walks the sets added or changed, and
// the entries of one removed go after their grace; unchanged sets are not
// walked and keep their entries.
func TestConfigureChanges(t *testing.T) {
	st := &mapStore{m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}}
	h := upAll(4)
	p, err := New(st, &h, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	signer := &fakeSigner{}
	ss := sets(4, signer)
	p.Configure(ss[:3], nil)
	t0 := time.Unix(100, 0)
	if _, err := p.Update(t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	next := sets(4, signer)
	next[1].Addrs[2] = netip.MustParseAddr("198.18.1.9")
	next[1].Value.Cand[2].Addr = [16]byte{198, 18, 1, 9}
	signer.signed = 0
	p.Configure([]Set{next[0], next[1], next[3]}, nil) // 1 changed, 2 gone, 3 new
	stats, err := p.Update(t0.Add(time.Second), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Set 1's window 0+1 is as before: its entry stays.
	if stats.Walked != 2 || signer.signed != 6 || stats.Written != 5 {
		t.Fatalf("%+v, %d signed; want sets 1 and 3 walked, their 6 answer sets signed, 5 written", stats, signer.signed)
	}
	stats, err = p.Update(t0.Add(time.Second+Grace), time.Hour)
	if err != nil || stats.Walked != 0 || stats.Removed != 5 {
		t.Fatalf("%+v (%v); want nothing walked, and set 2's 3 and set 1's 2 old windows removed", stats, err)
	}
	want := []bpf.SteadydnsSigKey{key(st, next[0], 60, 0, 1), key(st, next[0], 60, 1, 2), key(st, next[0], 60, 0, 2),
		key(st, next[1], 60, 0, 1), key(st, next[1], 60, 1, 2), key(st, next[1], 60, 0, 2),
		key(st, next[3], 60, 0, 1), key(st, next[3], 60, 1, 2), key(st, next[3], 60, 0, 2)}
	got := keysOf(st.m)
	slices.SortFunc(got, cmpKey)
	slices.SortFunc(want, cmpKey)
	if !slices.Equal(got, want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
}

func cmpKey(a, b bpf.SteadydnsSigKey) int {
	return cmp.Or(cmp.Compare(a.Hash, b.Hash), cmp.Compare(a.Content, b.Content), cmp.Compare(a.Ttl, b.Ttl))
}

// TestUpdateSharedEntry: a health entry two sets read walks both when it
// changes, and neither of the others.
func TestUpdateSharedEntry(t *testing.T) {
	st := &mapStore{m: map[bpf.SteadydnsSigKey]bpf.SteadydnsSigValue{}}
	h := upAll(4)
	p, err := New(st, &h, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ss := sets(4, &fakeSigner{})
	ss[1].Value.Cand = ss[0].Value.Cand // set 1 reads set 0's entries
	p.Configure(ss, nil)
	t0 := time.Unix(100, 0)
	if _, err := p.Update(t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	h[1] = false
	stats, err := p.Update(t0.Add(time.Second), time.Hour)
	if err != nil || stats.Walked != 2 || stats.Written != 2 {
		t.Fatalf("%+v (%v); want sets 0 and 1 walked, one entry written for each", stats, err)
	}
	if _, ok := st.m[key(st, ss[1], 20, 1, 2)]; !ok {
		t.Fatal("no entry for set 1's answers at the new health")
	}
}
