// Package presign signs, ahead of any query, every answer set the
// selection can produce for the record sets of zones signed online, and
// writes their RRSIGs where the XDP program serves them from (bpf/sigs.h):
// a DO=1 query of such a set is then answered signed from XDP, and only
// one that finds no signature (a moment after a change) goes to the
// fallback, which signs online.
package presign

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
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
// cryptography).
type Signer interface {
	Sign(rrset []dns.RR) ([]dns.RR, error)
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

// Presigner keeps the signatures of its sets' every possible answer in
// the store. Its methods are safe for concurrent use.
type Presigner struct {
	store  Store
	health Health

	mu    sync.Mutex
	sets  []Set
	ranks []selection.Ranks // every client region's ranking, for geo sets
	// epoch is the one entries are written under, live the one the
	// program reads: they differ only while Sync writes a new epoch.
	epoch, live uint32
	written     map[bpf.SteadydnsSigKey]*entry

	kick chan struct{}
}

type entry struct {
	value    bpf.SteadydnsSigValue
	unwanted time.Time // when it was last found not wanted; zero while wanted
}

// New returns a presigner of store. The entries an earlier process left
// are removed once its first Sync has written its own under a new epoch.
func New(store Store, h Health, now time.Time) (*Presigner, error) {
	e, err := store.CurrentSigEpoch()
	if err != nil {
		return nil, err
	}
	keys, err := store.SigKeys()
	if err != nil {
		return nil, err
	}
	p := &Presigner{store: store, health: h, epoch: e + 1, live: e, written: map[bpf.SteadydnsSigKey]*entry{}, kick: make(chan struct{}, 1)}
	for _, k := range keys {
		p.written[k] = &entry{unwanted: now}
	}
	return p, nil
}

// Configure sets the record sets to sign and the geo rankings of every
// client region. The next Sync applies them.
func (p *Presigner) Configure(sets []Set, ranks []selection.Ranks) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sets, p.ranks = sets, ranks
}

// Stats describe one Sync.
type Stats struct {
	Outcomes int // answer sets the sets can produce now
	Written  int // entries written
	Removed  int // entries removed
	Entries  int // entries in the store after it
	Bytes    int // their signatures' bytes
}

// Sync writes the signatures of every answer set the sets can produce at
// the health now in the data plane, and when the table is open (cold or
// stale), and removes those no longer wanted for Grace. A signature the
// signer made anew (refreshed, or by another key) moves every entry to a
// new epoch, so no entry is rewritten in place.
func (p *Presigner) Sync(now time.Time) (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var st Stats
	var errs []error
	type want struct {
		key   bpf.SteadydnsSigKey // its epoch left 0
		value bpf.SteadydnsSigValue
	}
	var wanted []want
	seen := map[bpf.SteadydnsSigKey]bool{}
	for i := range p.sets {
		s := &p.sets[i]
		v := s.Value
		var ranks []selection.Ranks
		if v.Flags&uint8(bpf.SteadydnsRrsetFlagsRR_GEO) != 0 {
			ranks = p.ranks
		}
		hash := loader.NameHash(s.Wire, s.Type)
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
				return
			}
			val, ok := Encode(sigs)
			if !ok {
				return // too long for the program: the fallback signs it
			}
			wanted = append(wanted, want{k, val})
		}
		selection.Outcomes(v, p.health.Up, ranks, p.health.Open(v.Stale), add)
		selection.Outcomes(v, p.health.Up, ranks, true, add)
		// NODATA's entry, whatever the health: it has no answers, so
		// content and TTL 0.
		if v.WhenAllDown == uint8(bpf.SteadydnsWhenAllDownWHEN_DOWN_NODATA) && s.NoData != nil {
			k := bpf.SteadydnsSigKey{Hash: hash}
			if recs := s.NoData(); recs != nil && !seen[k] {
				seen[k] = true
				st.Outcomes++
				if val, ok := EncodeNoData(recs, s.Wire); ok {
					wanted = append(wanted, want{k, val})
				}
			}
		}
	}

	// A signature that changed moves everything to a new epoch.
	for _, w := range wanted {
		k := w.key
		k.Epoch = p.epoch
		if e, ok := p.written[k]; ok && e.unwanted.IsZero() && e.value != w.value {
			p.epoch++
			break
		}
	}
	keep := map[bpf.SteadydnsSigKey]bool{}
	for _, w := range wanted {
		k := w.key
		k.Epoch = p.epoch
		keep[k] = true
		if e, ok := p.written[k]; ok && e.value == w.value {
			e.unwanted = time.Time{}
			continue
		}
		if err := p.store.PutSig(k, &w.value); err != nil {
			errs = append(errs, err)
			keep[k] = false
			continue
		}
		p.written[k] = &entry{value: w.value}
		st.Written++
	}
	if p.live != p.epoch {
		if err := p.store.SetSigEpoch(p.epoch); err != nil {
			errs = append(errs, err)
		} else {
			p.live = p.epoch
		}
	}
	for k, e := range p.written {
		switch {
		case keep[k]:
			st.Bytes += int(e.value.Len)
			continue
		case e.unwanted.IsZero():
			e.unwanted = now
		case now.Sub(e.unwanted) >= Grace:
			if err := p.store.DeleteSig(k); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(p.written, k)
			st.Removed++
			continue
		}
		st.Bytes += int(e.value.Len)
	}
	st.Entries = len(p.written)
	return st, errors.Join(errs...)
}

// Kick asks Run to Sync soon: the health table or the sets changed.
func (p *Presigner) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run syncs on every Kick, and every refresh besides, which renews
// signatures before they expire and removes entries past their Grace,
// until stop is closed.
func (p *Presigner) Run(stop <-chan struct{}, refresh time.Duration) {
	t := time.NewTicker(refresh)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-p.kick:
		case <-t.C:
		}
		if _, err := p.Sync(time.Now()); err != nil {
			slog.Warn("signing answers ahead: the fallback signs those left out", "error", err)
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
