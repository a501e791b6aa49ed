// Package presign signs, ahead of any query, every answer set the
// selection can produce for the record sets of zones signed online, and
// writes their RRSIGs where the XDP program serves them from (bpf/sigs.h):
// a DO=1 query of such a set is then answered signed from XDP, and only
// one that finds no signature (a moment after a change) goes to the
// fallback, which signs online.
package presign

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/selection"
	"github.com/steadydns/steadydns/loader"
)

// Store is where the program reads signatures; *loader.Objects is one.
type Store interface {
	PutSig(k bpf.SteadydnsSigKey, v *bpf.SteadydnsSigValue) error
	DeleteSig(k bpf.SteadydnsSigKey) error
	CurrentSigEpoch() (uint32, error)
	SetSigEpoch(e uint32) error
	SigKeys() ([]bpf.SteadydnsSigKey, error)
}

// Health is the health table as the data plane reads it (records.Health).
type Health interface {
	Up(index uint32) bool
	Open(stale uint8) bool
}

// Signer signs an RRset of a zone signed online (zone.Zone, whose signer
// caches signatures by content, so a set signed before costs no
// cryptography), and says when it would sign it otherwise.
type Signer interface {
	Sign(rrset []dns.RR) ([]dns.RR, error)
	// Renews says when Sign returns other signatures than sigs: refresh,
	// once they are due to be made again, and rekey, at the signer's next
	// key event; zero for never.
	Renews(sigs []dns.RR) (refresh, rekey time.Time)
}

// Set is a record set of the data plane whose answers are signed.
type Set struct {
	Name  string // fqdn
	Wire  string // its lowercased wire form, the record table's key (records.Wire)
	Type  uint16 // A or AAAA
	Value *bpf.Set
	Addrs []netip.Addr // per candidate
	Zone  Signer
	// NoData is the authority section of the set's signed NODATA as the
	// fallback answers it (the SOA, the NSEC at Name and their RRSIGs),
	// nil when it cannot be made. Asked only of sets whose when_all_down
	// is nodata.
	NoData func() []dns.RR
}

// Grace is how long an entry no longer wanted stays before it is removed:
// far longer than a query holds it, so the kernel never reuses an entry's
// memory under a query reading it.
const Grace = time.Second

// retry is how soon a set whose signing failed is walked again, and a
// write or removal that failed is tried again.
const retry = time.Second

// Presigner keeps the signatures of its sets' every possible answer in
// the store. It walks a set only when what its answers depend on changed:
// a health entry its selection read, the table's openness, the set itself
// or the geo rankings (Configure), or its signer's timing. Its methods
// are safe for concurrent use.
type Presigner struct {
	store  Store
	health Health

	mu    sync.Mutex
	sets  []Set
	state []setState // per set
	ranks []selection.Ranks
	geo   []uint8 // ranks tabulated, to tell a change
	// pending are the sets to walk at the next update.
	pending []int
	// watch holds every health entry a walk read, with the state read
	// and the sets that read it; open the same for the table's openness
	// by stale policy. A set's state agrees with them unless pending.
	watch map[uint32]*watch
	open  map[uint8]*watch
	// refresh and rekey are at most the earliest of the sets': before
	// them no set is due.
	refresh, rekey time.Time
	// want holds every entry a set wants, by its key with epoch 0, and
	// how many sets want it; dropped the keys no set wants any more.
	want    map[bpf.SteadydnsSigKey]*wanted
	dropped []bpf.SteadydnsSigKey
	// epoch is the one entries are written under, live the one the
	// program reads: they differ only while an update writes a new epoch.
	epoch, live uint32
	written     map[bpf.SteadydnsSigKey]*entry
	unwanted    map[bpf.SteadydnsSigKey]bool // written, waiting out their Grace
	unwritten   map[bpf.SteadydnsSigKey]bool // wanted, by key with epoch 0, not yet written
	bytes       int

	kick chan struct{}
}

// setState is what a set's last walk found.
type setState struct {
	walked         bool
	pending        bool
	wants          []want
	reads          []read
	stale          uint8
	open           bool
	refresh, rekey time.Time // its signer's, for its signatures
}

type read struct {
	index uint32
	up    bool
}

type want struct {
	key   bpf.SteadydnsSigKey // its epoch left 0
	value bpf.SteadydnsSigValue
}

type watch struct {
	up   bool
	sets map[int]struct{}
}

type wanted struct {
	value bpf.SteadydnsSigValue
	sets  int
}

type entry struct {
	value    bpf.SteadydnsSigValue
	unwanted time.Time // when it was last found not wanted; zero while wanted
}

// New returns a presigner of store. The entries an earlier process left
// are removed once its first update has written its own under a new epoch.
func New(store Store, h Health, now time.Time) (*Presigner, error) {
	e, err := store.CurrentSigEpoch()
	if err != nil {
		return nil, err
	}
	keys, err := store.SigKeys()
	if err != nil {
		return nil, err
	}
	p := &Presigner{store: store, health: h, epoch: e + 1, live: e, watch: map[uint32]*watch{}, open: map[uint8]*watch{},
		want: map[bpf.SteadydnsSigKey]*wanted{}, written: map[bpf.SteadydnsSigKey]*entry{}, unwanted: map[bpf.SteadydnsSigKey]bool{},
		unwritten: map[bpf.SteadydnsSigKey]bool{}, kick: make(chan struct{}, 1)}
	for _, k := range keys {
		p.written[k] = &entry{unwanted: now}
		p.unwanted[k] = true
	}
	return p, nil
}

// Configure sets the record sets to sign and the geo rankings of every
// client region. The next update walks the sets that are new or differ
// from those before, and the geo sets when the rankings changed.
func (p *Presigner) Configure(sets []Set, ranks []selection.Ranks) {
	p.mu.Lock()
	defer p.mu.Unlock()
	geo := tabulate(ranks)
	geoChanged := !slices.Equal(geo, p.geo)
	type id struct {
		wire string
		typ  uint16
	}
	before := make(map[id]int, len(p.sets))
	for i := range p.sets {
		if j, dup := before[id{p.sets[i].Wire, p.sets[i].Type}]; dup {
			p.release(p.state[j].wants)
		}
		before[id{p.sets[i].Wire, p.sets[i].Type}] = i
	}
	state := make([]setState, len(sets))
	p.pending = p.pending[:0]
	p.refresh, p.rekey = time.Time{}, time.Time{}
	for i := range sets {
		s := &sets[i]
		j, ok := before[id{s.Wire, s.Type}]
		if ok {
			delete(before, id{s.Wire, s.Type})
			state[i] = p.state[j]
		}
		if !ok || !state[i].walked || state[i].pending || !same(&p.sets[j], s) || geoChanged && isGeo(s) {
			// Its walk releases what its state wants.
			state[i].pending = true
			p.pending = append(p.pending, i)
			continue
		}
		p.refresh, p.rekey = earliest(p.refresh, state[i].refresh), earliest(p.rekey, state[i].rekey)
	}
	for _, j := range before {
		p.release(p.state[j].wants)
	}
	watches, opens := p.watch, p.open
	p.watch, p.open = map[uint32]*watch{}, map[uint8]*watch{}
	for i := range state {
		if state[i].walked {
			p.watchSet(i, &state[i], watches, opens)
		}
	}
	p.sets, p.state, p.ranks, p.geo = sets, state, ranks, geo
}

// tabulate is every client region's rank of every region.
func tabulate(ranks []selection.Ranks) []uint8 {
	var out []uint8
	for _, r := range ranks {
		for region := range 256 {
			if r == nil {
				out = append(out, 0)
			} else {
				out = append(out, r(uint8(region)))
			}
		}
	}
	return out
}

func isGeo(s *Set) bool { return s.Value.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_GEO) != 0 }

// same reports whether a and b have the same answers, signed by the same
// signer.
func same(a, b *Set) bool {
	return a.Name == b.Name && a.Wire == b.Wire && a.Type == b.Type && a.Zone == b.Zone &&
		a.Value.SteadydnsRrset == b.Value.SteadydnsRrset && slices.Equal(a.Value.Pool, b.Value.Pool) && slices.Equal(a.Addrs, b.Addrs)
}

// Stats describe one update.
type Stats struct {
	Walked   int // sets walked
	Outcomes int // answer sets the sets walked can produce now
	Written  int // entries written
	Removed  int // entries removed
	Entries  int // entries in the store after it
	Bytes    int // their signatures' bytes
	// Next is when an update has work without a change: a signature to
	// renew, a key event, an entry to remove; zero for none.
	Next time.Time
}

// Sync walks every set: it writes the signatures of every answer set the
// sets can produce at the health now in the data plane, and when the table
// is open (cold or stale), and removes those no longer wanted for Grace. A
// signature the signer made anew (refreshed, or by another key) moves
// every entry to a new epoch, so no entry is rewritten in place.
func (p *Presigner) Sync(now time.Time) (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.update(now, 0, true)
}

// Update does what Sync does for the sets whose answers or signatures may
// have changed since they were walked: those that read a health entry, or
// the table's openness, that differs now; those Configure changed; those
// whose signatures are due for refresh, batch after the first of them is,
// so that renewals that fall close share one move of the epoch; and every
// set of a signer past its key event. With nothing changed it reads the
// health entries the sets depend on and walks none.
func (p *Presigner) Update(now time.Time, batch time.Duration) (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.update(now, batch, false)
}

func (p *Presigner) update(now time.Time, batch time.Duration, all bool) (Stats, error) {
	var st Stats
	var errs []error
	// Each entry a walk reads is read once, so that every walk of an
	// update sees one state of it; one read otherwise than the watch has
	// it makes the sets that read it before pending too (watchSet).
	ups, opens := map[uint32]bool{}, map[uint8]bool{}
	up := func(i uint32) bool {
		u, ok := ups[i]
		if !ok {
			u = p.health.Up(i)
			ups[i] = u
		}
		return u
	}
	open := func(stale uint8) bool {
		o, ok := opens[stale]
		if !ok {
			o = p.health.Open(stale)
			opens[stale] = o
		}
		return o
	}
	for i, w := range p.watch {
		if u := p.health.Up(i); u != w.up {
			ups[i] = u
			p.mark(w.sets)
		}
	}
	for s, w := range p.open {
		if o := p.health.Open(s); o != w.up {
			opens[s] = o
			p.mark(w.sets)
		}
	}
	if all || due(p.rekey, now) || !p.refresh.IsZero() && due(p.refresh.Add(batch), now) {
		p.refresh, p.rekey = time.Time{}, time.Time{}
		for i := range p.state {
			s := &p.state[i]
			if all || due(s.rekey, now) || due(s.refresh, now) {
				p.markOne(i)
			} else {
				p.refresh, p.rekey = earliest(p.refresh, s.refresh), earliest(p.rekey, s.rekey)
			}
		}
	}

	var touched []bpf.SteadydnsSigKey // wanted anew, or with a new value
	slices.Sort(p.pending)
	for n := 0; n < len(p.pending); n++ { // walks may make more pending
		i := p.pending[n]
		old := p.state[i]
		next, err := p.walk(i, up, open, now, &st)
		if err != nil {
			errs = append(errs, err)
		}
		for _, w := range next.wants {
			switch e := p.want[w.key]; {
			case e == nil:
				p.want[w.key] = &wanted{value: w.value, sets: 1}
				touched = append(touched, w.key)
			case e.value != w.value:
				e.value = w.value
				e.sets++
				touched = append(touched, w.key)
			default:
				e.sets++
			}
		}
		p.release(old.wants)
		if old.walked {
			p.unwatch(i, &old)
		}
		p.state[i] = next
		p.watchSet(i, &p.state[i], nil, nil)
		p.refresh, p.rekey = earliest(p.refresh, next.refresh), earliest(p.rekey, next.rekey)
		st.Walked++
	}
	p.pending = p.pending[:0]

	// A signature that changed moves everything to a new epoch.
	move := false
	for _, k := range touched {
		w, ok := p.want[k]
		if e := p.written[at(k, p.epoch)]; ok && e != nil && e.value != w.value {
			move = true
			break
		}
	}
	if move {
		p.epoch++
		for k := range p.written {
			p.drop(k, now)
		}
		for k := range p.want {
			p.unwritten[k] = true
		}
	} else {
		for _, k := range touched {
			p.unwritten[k] = true
		}
		for _, k := range p.dropped {
			if _, ok := p.want[k]; !ok {
				p.drop(at(k, p.epoch), now)
			}
		}
	}
	p.dropped = p.dropped[:0]
	for k := range p.unwritten {
		w, ok := p.want[k]
		if !ok {
			delete(p.unwritten, k)
			continue
		}
		ek := at(k, p.epoch)
		if e := p.written[ek]; e != nil && e.value == w.value {
			e.unwanted = time.Time{}
			delete(p.unwanted, ek)
			delete(p.unwritten, k)
			continue
		}
		if err := p.store.PutSig(ek, &w.value); err != nil {
			errs = append(errs, err)
			st.Next = earliest(st.Next, now.Add(retry))
			continue
		}
		p.written[ek] = &entry{value: w.value}
		p.bytes += int(w.value.Len)
		delete(p.unwritten, k)
		st.Written++
	}
	if p.live != p.epoch {
		if err := p.store.SetSigEpoch(p.epoch); err != nil {
			errs = append(errs, err)
			st.Next = earliest(st.Next, now.Add(retry))
		} else {
			p.live = p.epoch
		}
	}
	for k := range p.unwanted {
		e := p.written[k]
		if gone := e.unwanted.Add(Grace); now.Before(gone) {
			st.Next = earliest(st.Next, gone)
			continue
		}
		if err := p.store.DeleteSig(k); err != nil {
			errs = append(errs, err)
			st.Next = earliest(st.Next, now.Add(retry))
			continue
		}
		delete(p.written, k)
		delete(p.unwanted, k)
		p.bytes -= int(e.value.Len)
		st.Removed++
	}
	st.Next = earliest(st.Next, p.rekey)
	if !p.refresh.IsZero() {
		st.Next = earliest(st.Next, p.refresh.Add(batch))
	}
	st.Entries, st.Bytes = len(p.written), p.bytes
	return st, errors.Join(errs...)
}

// walk signs every answer set set i can produce at the health up reads,
// and with the table open.
func (p *Presigner) walk(i int, up func(uint32) bool, open func(uint8) bool, now time.Time, st *Stats) (setState, error) {
	s := &p.sets[i]
	v := s.Value
	next := setState{walked: true, stale: v.Stale, open: open(v.Stale)}
	var errs []error
	var ranks []selection.Ranks
	if isGeo(s) {
		ranks = p.ranks
	}
	renews := func(recs []dns.RR) {
		refresh, rekey := s.Zone.Renews(recs)
		next.refresh, next.rekey = earliest(next.refresh, refresh), earliest(next.rekey, rekey)
	}
	failed := func() { next.refresh = now }
	hash := loader.NameHash(s.Wire, s.Type)
	seen := map[bpf.SteadydnsSigKey]bool{}
	add := func(o selection.Outcome) {
		k := bpf.SteadydnsSigKey{Hash: hash, Ttl: o.TTL, Content: content(s, o.Mask)}
		if seen[k] {
			return
		}
		seen[k] = true
		st.Outcomes++
		sigs, err := s.Zone.Sign(rrset(s, o))
		if err != nil {
			errs = append(errs, fmt.Errorf("signing %s %s: %w", s.Name, dns.TypeToString[s.Type], err))
			failed()
			return
		}
		renews(sigs)
		if val, ok := Encode(sigs); ok { // else too long for the program: the fallback signs it
			next.wants = append(next.wants, want{k, val})
		}
	}
	reading := func(c uint32) bool {
		u := up(c)
		next.reads = append(next.reads, read{c, u})
		return u
	}
	selection.Outcomes(v, reading, ranks, next.open, add)
	selection.Outcomes(v, reading, ranks, true, add)
	// NODATA's entry, whatever the health: it has no answers, so
	// content and TTL 0.
	if v.WhenAllDown == uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA) && s.NoData != nil {
		k := bpf.SteadydnsSigKey{Hash: hash}
		if recs := s.NoData(); recs == nil {
			failed()
		} else if !seen[k] {
			seen[k] = true
			st.Outcomes++
			renews(recs)
			if val, ok := EncodeNoData(recs, s.Wire); ok {
				next.wants = append(next.wants, want{k, val})
			}
		}
	}
	slices.SortFunc(next.reads, func(a, b read) int { return cmp.Compare(a.index, b.index) })
	next.reads = slices.Compact(next.reads)
	// A time already past (a failure, or a signer's clock behind now)
	// is tried again shortly rather than at once, over and over.
	for _, t := range []*time.Time{&next.refresh, &next.rekey} {
		if !t.IsZero() && !t.After(now) {
			*t = now.Add(retry)
		}
	}
	return next, errors.Join(errs...)
}

// mark makes sets pending.
func (p *Presigner) mark(sets map[int]struct{}) {
	for i := range sets {
		p.markOne(i)
	}
}

func (p *Presigner) markOne(i int) {
	if !p.state[i].pending {
		p.state[i].pending = true
		p.pending = append(p.pending, i)
	}
}

// release gives up a set's wants: those no other set wants are dropped.
func (p *Presigner) release(wants []want) {
	for _, w := range wants {
		if e := p.want[w.key]; e != nil {
			if e.sets--; e.sets == 0 {
				delete(p.want, w.key)
				p.dropped = append(p.dropped, w.key)
			}
		}
	}
}

// watchSet records what set i's state read. An entry new to the watch
// takes its state from before, when it was watched there.
func (p *Presigner) watchSet(i int, s *setState, before map[uint32]*watch, opens map[uint8]*watch) {
	for _, r := range s.reads {
		w := p.watch[r.index]
		if w == nil {
			w = &watch{up: r.up, sets: map[int]struct{}{}}
			if b := before[r.index]; b != nil {
				w.up = b.up
			}
			p.watch[r.index] = w
		} else if before == nil && w.up != r.up {
			w.up = r.up
			p.mark(w.sets)
		}
		w.sets[i] = struct{}{}
	}
	w := p.open[s.stale]
	if w == nil {
		w = &watch{up: s.open, sets: map[int]struct{}{}}
		if b := opens[s.stale]; b != nil {
			w.up = b.up
		}
		p.open[s.stale] = w
	} else if opens == nil && w.up != s.open {
		w.up = s.open
		p.mark(w.sets)
	}
	w.sets[i] = struct{}{}
}

// unwatch forgets what set i's state read.
func (p *Presigner) unwatch(i int, s *setState) {
	for _, r := range s.reads {
		if w := p.watch[r.index]; w != nil {
			if delete(w.sets, i); len(w.sets) == 0 {
				delete(p.watch, r.index)
			}
		}
	}
	if w := p.open[s.stale]; w != nil {
		if delete(w.sets, i); len(w.sets) == 0 {
			delete(p.open, s.stale)
		}
	}
}

// drop starts the Grace of a written entry.
func (p *Presigner) drop(k bpf.SteadydnsSigKey, now time.Time) {
	if e := p.written[k]; e != nil && e.unwanted.IsZero() {
		e.unwanted = now
		p.unwanted[k] = true
	}
}

// at is k under epoch e.
func at(k bpf.SteadydnsSigKey, e uint32) bpf.SteadydnsSigKey {
	k.Epoch = e
	return k
}

// due reports whether t, zero for never, has come at now.
func due(t, now time.Time) bool { return !t.IsZero() && !now.Before(t) }

// earliest is the earlier of a and b, zero standing for never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// Kick asks Run to update soon: the health table or the sets changed.
func (p *Presigner) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run updates on every Kick, and at the time the last update named for
// renewing signatures, batched by batch, for key events and for removing
// entries past their Grace, until stop is closed.
func (p *Presigner) Run(stop <-chan struct{}, batch time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-p.kick:
		case <-t.C:
		}
		st, err := p.Update(time.Now(), batch)
		if err != nil {
			slog.Warn("signing answers ahead: the fallback signs those left out", "error", err)
		}
		t.Stop()
		if !st.Next.IsZero() {
			t.Reset(time.Until(st.Next))
		}
	}
}

// content is the key's content of the candidates in mask: the sum of
// loader.AnswerContent, as the program adds it up over its answers.
func content(s *Set, mask uint64) uint64 {
	var c uint64
	for j := range s.Addrs {
		if mask&(1<<j) != 0 {
			c += loader.AnswerContent(s.Type, addr16(s.Addrs[j]))
		}
	}
	return c
}

// addr16 is an address as a candidate holds it: an IPv4 one in its
// first 4 bytes.
func addr16(a netip.Addr) [16]byte {
	if a.Is4() {
		var b [16]byte
		v := a.As4()
		copy(b[:], v[:])
		return b
	}
	return a.As16()
}

// rrset is the answers of o as a reply holds them.
func rrset(s *Set, o selection.Outcome) []dns.RR {
	hdr := dns.RR_Header{Name: s.Name, Rrtype: s.Type, Class: dns.ClassINET, Ttl: o.TTL}
	var out []dns.RR
	for j, a := range s.Addrs {
		if o.Mask&(1<<j) == 0 {
			continue
		}
		if s.Type == dns.TypeA {
			v := a.As4()
			out = append(out, &dns.A{Hdr: hdr, A: net.IP(v[:])})
		} else {
			v := a.As16()
			out = append(out, &dns.AAAA{Hdr: hdr, AAAA: net.IP(v[:])})
		}
	}
	return out
}

// EncodeNoData is the entry a NODATA's reply copies into its authority
// section: recs with each owner a pointer into the question's name, wire
// (the owner's lowercased wire form) where it equals the name or the
// zone's name it ends with, and the rest uncompressed, as the program's
// own SOA is. false when they do not fit.
func EncodeNoData(recs []dns.RR, wire string) (bpf.SteadydnsSigValue, bool) {
	var v bpf.SteadydnsSigValue
	buf := make([]byte, 2048)
	n := 0
	for _, rr := range recs {
		end, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			return v, false
		}
		owner, err := dns.PackDomainName(strings.ToLower(rr.Header().Name), make([]byte, 256), 0, nil, false)
		if err != nil {
			return v, false
		}
		ownerWire := strings.ToLower(string(buf[:owner]))
		if !strings.HasSuffix(wire, ownerWire) || !dns.IsSubDomain(rr.Header().Name, wireName(wire)) || n+2+end-owner > len(v.Rr) {
			return v, false
		}
		ptr := 12 + len(wire) - len(ownerWire) // the question's name starts at 12
		v.Rr[n], v.Rr[n+1] = byte(0xc0|ptr>>8), byte(ptr)
		n += 2 + copy(v.Rr[n+2:], buf[owner:end])
	}
	if n == 0 {
		return v, false
	}
	v.Len, v.Count = uint16(n), uint16(len(recs))
	v.Sum = loader.SigSum(v.Rr[:n])
	return v, true
}

// wireName is the name of a wire form.
func wireName(wire string) string {
	name, _, err := dns.UnpackDomainName([]byte(wire), 0)
	if err != nil {
		return ""
	}
	return name
}

// Encode is the entry the program appends for sigs: each RRSIG with a
// pointer to the question's name as its owner, the signer's name
// uncompressed (RFC 4034 §3.1.7). false when they do not fit.
func Encode(sigs []dns.RR) (bpf.SteadydnsSigValue, bool) {
	var v bpf.SteadydnsSigValue
	if len(sigs) == 0 {
		return v, false
	}
	buf := make([]byte, 2048)
	n := 0
	for _, rr := range sigs {
		end, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			return v, false
		}
		owner, err := dns.PackDomainName(rr.Header().Name, make([]byte, 256), 0, nil, false)
		if err != nil || n+2+end-owner > len(v.Rr) {
			return v, false
		}
		v.Rr[n], v.Rr[n+1] = 0xc0, 0x0c
		n += 2 + copy(v.Rr[n+2:], buf[owner:end])
	}
	v.Len, v.Count = uint16(n), uint16(len(sigs))
	v.Sum = loader.SigSum(v.Rr[:n])
	return v, true
}
