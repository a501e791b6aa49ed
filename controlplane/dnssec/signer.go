package dnssec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
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
// Any number of goroutines may sign at once.
type Signer struct {
	zone    string
	keys    []*Key
	dnskeys []dns.RR // the published keys
	ksk     []*Key   // active keys that sign the DNSKEY set
	zsk     []*Key   // active keys that sign the rest
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	sigs    []dns.RR
	refresh time.Time
}

// NewSigner returns the signer of zone with keys as of now. A zone needs an
// active KSK or CSK; with no active ZSK the KSKs sign everything.
func NewSigner(zone string, keys []*Key, now func() time.Time) (*Signer, error) {
	s := &Signer{zone: dns.CanonicalName(zone), keys: keys, now: now, cache: map[string]cached{}}
	t := now()
	for _, k := range keys {
		if k.Published(t) || k.Active(t) {
			s.dnskeys = append(s.dnskeys, k.DNSKEY)
		}
		switch {
		case !k.Active(t):
		case k.KSK():
			s.ksk = append(s.ksk, k)
		default:
			s.zsk = append(s.zsk, k)
		}
	}
	if len(s.ksk) == 0 {
		return nil, fmt.Errorf("signing %s: no active key-signing key", s.zone)
	}
	if len(s.zsk) == 0 {
		s.zsk = s.ksk
	}
	return s, nil
}

// DNSKEYs returns the zone's DNSKEY set.
func (s *Signer) DNSKEYs() []dns.RR { return s.dnskeys }

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
	s.mu.Lock()
	c, ok := s.cache[key]
	s.mu.Unlock()
	if !ok || !t.Before(c.refresh) {
		if c, err = s.sign(rrset, t); err != nil {
			return nil, err
		}
		s.mu.Lock()
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

func (s *Signer) sign(rrset []dns.RR, t time.Time) (cached, error) {
	keys := s.zsk
	if rrset[0].Header().Rrtype == dns.TypeDNSKEY {
		keys = s.ksk
	}
	jitter := time.Duration(rand.Int64N(int64(2*Jitter))) - Jitter
	inception := t.Add(-skew)
	expiration := t.Add(Validity + jitter)
	c := cached{refresh: t.Add(Refresh + jitter/2)}
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
	return c, nil
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
