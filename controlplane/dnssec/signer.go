package dnssec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Signature timing. A signature is valid from an hour before it is made,
// for clocks that lag, to Validity after, moved by up to ±Jitter so that
// the signatures of a zone do not all expire in the same second. A cached
// signature is made again once Refresh has passed, well before a resolver
// could hold it past its expiry.
const (
	Validity = 14 * 24 * time.Hour
	Jitter   = 12 * time.Hour
	Refresh  = 7 * 24 * time.Hour
	skew     = time.Hour
)

// maxCached bounds the cache: past it an arbitrary entry makes room. Every
// answer set a selection can produce of one set is at most a few hundred.
const maxCached = 1 << 16

// Signer signs the RRsets of one zone with its active keys and keeps each
// set's signatures, by the set's content, until they are due for refresh.
// Which keys are published and sign follows their timing: each call
// compares the clock with the next key event, and past it the key set is
// made again and the cached signatures are dropped. Any number of
// goroutines may sign at once.
type Signer struct {
	zone string
	keys []*Key
	now  func() time.Time
	set  atomic.Pointer[keySet]

	mu    sync.Mutex
	gen   uint64 // of the latest key set
	cache map[string]cached
}

// keySet is what the keys do from from until next (zero: no further
// event).
type keySet struct {
	from, next time.Time
	gen        uint64
	dnskeys    []dns.RR // the published keys
	ksk        []*Key   // active keys that sign the DNSKEY set
	zsk        []*Key   // active keys that sign the rest
}

type cached struct {
	sigs    []dns.RR
	refresh time.Time
	gen     uint64 // the key set that made them
}

// NewSigner returns the signer of zone with keys, whose timing it follows
// by the clock now. A zone needs an active KSK or CSK; with no active ZSK
// the KSKs sign everything.
func NewSigner(zone string, keys []*Key, now func() time.Time) (*Signer, error) {
	s := &Signer{zone: dns.CanonicalName(zone), keys: keys, now: now, cache: map[string]cached{}}
	if _, err := s.keySet(now()); err != nil {
		return nil, err
	}
	return s, nil
}

// keySet returns the key set at t, making it again past its next event.
func (s *Signer) keySet(t time.Time) (*keySet, error) {
	if ks := s.set.Load(); ks != nil && !t.Before(ks.from) && (ks.next.IsZero() || t.Before(ks.next)) {
		return ks, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.set.Load(); ks != nil && !t.Before(ks.from) && (ks.next.IsZero() || t.Before(ks.next)) {
		return ks, nil // another caller made it
	}
	ks := &keySet{}
	for _, k := range s.keys {
		for _, e := range k.events()[1:] { // Created changes nothing
			switch at := *e.at; {
			case at.IsZero():
			case !t.Before(at):
				if at.After(ks.from) {
					ks.from = at
				}
			case ks.next.IsZero() || at.Before(ks.next):
				ks.next = at
			}
		}
		if k.Published(t) {
			ks.dnskeys = append(ks.dnskeys, k.DNSKEY)
		}
		switch {
		case !k.Active(t):
		case k.KSK():
			ks.ksk = append(ks.ksk, k)
		default:
			ks.zsk = append(ks.zsk, k)
		}
	}
	if len(ks.ksk) == 0 {
		return nil, fmt.Errorf("signing %s: no active key-signing key at %s", s.zone, t.UTC().Format(time.DateTime))
	}
	if len(ks.zsk) == 0 {
		ks.zsk = ks.ksk
	}
	if old := s.set.Load(); old == nil || !slices.Equal(old.dnskeys, ks.dnskeys) ||
		!slices.Equal(old.ksk, ks.ksk) || !slices.Equal(old.zsk, ks.zsk) {
		s.gen++
		clear(s.cache)
	}
	ks.gen = s.gen
	s.set.Store(ks)
	return ks, nil
}

// DNSKEYs returns the zone's DNSKEY set now: the published keys. With no
// active key-signing key it is empty, and every signature fails.
func (s *Signer) DNSKEYs() []dns.RR {
	ks, err := s.keySet(s.now())
	if err != nil {
		return nil
	}
	return ks.dnskeys
}

// Keys returns every key the signer was made with.
func (s *Signer) Keys() []*Key { return s.keys }

// Sign returns the RRSIGs of rrset, one RRset of the zone: one per active
// key that signs its type. They are owned by rrset's first owner as spelled
// there and must not be modified.
func (s *Signer) Sign(rrset []dns.RR) ([]dns.RR, error) {
	key, err := cacheKey(rrset)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", rrset[0].Header().Name, err)
	}
	t := s.now()
	ks, err := s.keySet(t)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	c, ok := s.cache[key]
	s.mu.Unlock()
	if !ok || !t.Before(c.refresh) || c.gen != ks.gen {
		if c, err = s.sign(ks, rrset, t); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if c.gen != s.gen {
			// The key set changed while signing: keep nothing made
			// with the old one.
			s.mu.Unlock()
			return owned(c.sigs, rrset[0].Header().Name), nil
		}
		if len(s.cache) >= maxCached {
			for k := range s.cache {
				delete(s.cache, k)
				break
			}
		}
		s.cache[key] = c
		s.mu.Unlock()
	}
	return owned(c.sigs, rrset[0].Header().Name), nil
}

func (s *Signer) sign(ks *keySet, rrset []dns.RR, t time.Time) (cached, error) {
	keys := ks.zsk
	if rrset[0].Header().Rrtype == dns.TypeDNSKEY {
		keys = ks.ksk
	}
	jitter := time.Duration(rand.Int64N(int64(2*Jitter))) - Jitter
	inception := t.Add(-skew)
	expiration := t.Add(Validity + jitter)
	c := cached{gen: ks.gen}
	for _, k := range keys {
		sig := &dns.RRSIG{
			Hdr:        dns.RR_Header{Ttl: rrset[0].Header().Ttl},
			Algorithm:  k.DNSKEY.Algorithm,
			KeyTag:     k.Tag(),
			SignerName: s.zone,
			Inception:  uint32(inception.Unix()),
			Expiration: uint32(expiration.Unix()),
		}
		if err := sig.Sign(k.Signer, rrset); err != nil {
			return cached{}, fmt.Errorf("signing %s %s with key %d: %w", rrset[0].Header().Name,
				dns.TypeToString[rrset[0].Header().Rrtype], k.Tag(), err)
		}
		sig.Hdr.Name = dns.CanonicalName(sig.Hdr.Name)
		c.sigs = append(c.sigs, sig)
	}
	c.refresh = renewal(c.sigs[0].(*dns.RRSIG))
	return c, nil
}

// renewal is when Sign makes sig's set's signatures again: Refresh after
// sig was made, moved by half its jitter. It is read off the signature so
// that Renews knows it from the signature alone.
func renewal(sig *dns.RRSIG) time.Time {
	made := time.Unix(int64(sig.Inception), 0).Add(skew)
	jitter := time.Unix(int64(sig.Expiration), 0).Sub(made) - Validity
	return made.Add(Refresh + jitter/2).Truncate(time.Second)
}

// Renews says when Sign returns other signatures than sigs, which it
// made: refresh, when the earliest of them is due to be made again, and
// rekey, the next key event, past which every signature may change
// (zero: none ahead).
func (s *Signer) Renews(sigs []dns.RR) (refresh, rekey time.Time) {
	for _, rr := range sigs {
		if sig, ok := rr.(*dns.RRSIG); ok {
			if r := renewal(sig); refresh.IsZero() || r.Before(refresh) {
				refresh = r
			}
		}
	}
	if ks := s.set.Load(); ks != nil {
		rekey = ks.next
	}
	return refresh, rekey
}

// cacheKey is the set's canonical content: its records in wire form with
// the owner lowercased, sorted. Order and the owner's case do not change a
// signature, so answers that differ only there share one.
func cacheKey(rrset []dns.RR) (string, error) {
	wires := make([][]byte, len(rrset))
	for i, rr := range rrset {
		buf := make([]byte, dns.Len(rr)+1)
		n, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			return "", fmt.Errorf("packing the set: %w", err)
		}
		// The owner comes first, uncompressed. Its length bytes are at
		// most 63, below 'A', so lowercasing up to the root label leaves
		// them alone; the records stay untouched for other readers.
		for j := 0; j < n && buf[j] != 0; j += int(buf[j]) + 1 {
			for l := j + 1; l <= j+int(buf[j]) && l < n; l++ {
				if 'A' <= buf[l] && buf[l] <= 'Z' {
					buf[l] += 'a' - 'A'
				}
			}
		}
		wires[i] = buf[:n]
	}
	slices.SortFunc(wires, bytes.Compare)
	return string(bytes.Join(wires, nil)), nil
}

// owned returns sigs owned by name, copying them only when name is spelled
// otherwise.
func owned(sigs []dns.RR, name string) []dns.RR {
	if len(sigs) == 0 || sigs[0].Header().Name == name {
		return sigs[:len(sigs):len(sigs)]
	}
	out := make([]dns.RR, len(sigs))
	for i, sig := range sigs {
		c := dns.Copy(sig)
		c.Header().Name = name
		out[i] = c
	}
	return out
}
