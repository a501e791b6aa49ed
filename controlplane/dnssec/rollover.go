package dnssec

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Schedule holds the waits of a rollover (RFC 7583), each a TTL that
// resolvers may cache something for, plus Propagation for the clocks and
// the servers of the zone to agree.
type Schedule struct {
	DNSKEYTTL   time.Duration // the DNSKEY set's TTL
	MaxTTL      time.Duration // the longest TTL of the zone's other sets
	DSTTL       time.Duration // the parent's DS TTL
	Propagation time.Duration
}

// Known is how long after a key is published every cache holds it.
func (s Schedule) Known() time.Duration { return s.DNSKEYTTL + s.Propagation }

// Retire is how long an inactive key stays published: until every
// signature it made has left the caches.
func (s Schedule) Retire() time.Duration { return s.MaxTTL + s.Propagation }

// DSGone is how long after the parent swapped the DS the old one may still
// be cached.
func (s Schedule) DSGone() time.Duration { return s.DSTTL + s.Propagation }

// Rollover starts the rollover of the zone's ZSK (ksk false) or of its KSK
// or CSK (ksk true) at at, writing a new key into dir and the end of the
// old one's life into its files. A ZSK is pre-published: the new one signs
// once every cache knows it, and the old one stops then. A KSK or CSK is
// double-signed: the new one signs at once beside the old, which stays
// until Complete. It returns the new key.
func Rollover(dir, zone string, keys []*Key, ksk bool, sch Schedule, at time.Time) (*Key, error) {
	at = at.UTC().Truncate(time.Second)
	if ksk {
		return rolloverKSK(dir, zone, keys, at)
	}
	var old []*Key
	for _, k := range keys {
		if k.KSK() {
			continue
		}
		if k.Activate.After(at) || !k.Inactive.IsZero() && k.Inactive.After(at) {
			return nil, fmt.Errorf("a ZSK rollover is under way: key %d %s", k.Tag(), next(k, at))
		}
		if k.Active(at) {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return nil, errors.New("no active ZSK to roll: roll the CSK with --key csk")
	}
	k, err := newKey(dir, zone, old[0].DNSKEY.Algorithm, flagZSK, at, at.Add(sch.Known()))
	if err != nil {
		return nil, err
	}
	// Written after the new key: should this stop half way, both sign
	// for a while, which validates.
	for _, o := range old {
		o.Inactive, o.Delete = k.Activate, k.Activate.Add(sch.Retire())
		if err := o.Save(); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func rolloverKSK(dir, zone string, keys []*Key, at time.Time) (*Key, error) {
	var alg uint8
	for _, k := range keys {
		if !k.KSK() || !k.Active(at) {
			continue
		}
		if k.Inactive.IsZero() && alg != 0 {
			return nil, fmt.Errorf("a KSK rollover is under way: key %d waits for its DS, then rollover --complete", newest(keys, at).Tag())
		}
		if !k.Inactive.IsZero() {
			return nil, fmt.Errorf("a KSK rollover is under way: key %d %s", k.Tag(), next(k, at))
		}
		if !at.After(k.Publish) {
			// The newer key is told from the older by its Publish time.
			return nil, fmt.Errorf("key %d is published at %s: start its rollover later", k.Tag(), k.Publish.Format(time.DateTime))
		}
		alg = k.DNSKEY.Algorithm
	}
	if alg == 0 {
		return nil, errors.New("no active KSK or CSK to roll")
	}
	return newKey(dir, zone, alg, flagKSK, at, at)
}

// Complete ends a KSK or CSK rollover once the parent serves the new key's
// DS in place of the old: the old keys stop signing when the old DS has
// left the caches, and leave the DNSKEY set once their signatures have.
// It returns the keys it retired.
func Complete(keys []*Key, sch Schedule, at time.Time) ([]*Key, error) {
	at = at.UTC().Truncate(time.Second)
	n := newest(keys, at)
	if n == nil || len(doubled(keys, at)) < 2 {
		return nil, errors.New("no KSK rollover is under way")
	}
	if ready := n.Publish.Add(sch.Known()); at.Before(ready) {
		return nil, fmt.Errorf("too early: the parent may take key %d's DS from %s, once every cache knows the key", n.Tag(), ready.Format(time.DateTime))
	}
	var retired []*Key
	for _, k := range doubled(keys, at) {
		if k == n {
			continue
		}
		k.Inactive = at.Add(sch.DSGone())
		k.Delete = k.Inactive.Add(sch.Retire())
		if err := k.Save(); err != nil {
			return nil, err
		}
		retired = append(retired, k)
	}
	return retired, nil
}

// doubled returns the KSKs active at t with no end set: more than one is a
// double-signature rollover waiting for its DS.
func doubled(keys []*Key, t time.Time) []*Key {
	var out []*Key
	for _, k := range keys {
		if k.KSK() && k.Active(t) && k.Inactive.IsZero() {
			out = append(out, k)
		}
	}
	return out
}

// newest returns the most recently published of doubled(keys, t).
func newest(keys []*Key, t time.Time) *Key {
	var n *Key
	for _, k := range doubled(keys, t) {
		if n == nil || k.Publish.After(n.Publish) || k.Publish.Equal(n.Publish) && k.Created.After(n.Created) {
			n = k
		}
	}
	return n
}

// State says where a key stands at a time, and what comes next.
type State struct {
	Key   *Key
	Role  string // CSK, KSK or ZSK
	State string // created, published, active, waiting for DS, inactive, deleted
	Next  string // the next event, "" for none
	At    time.Time
}

// States returns the state of each key at t.
func States(keys []*Key, sch Schedule, t time.Time) []State {
	var waiting *Key
	if len(doubled(keys, t)) > 1 {
		waiting = newest(keys, t)
	}
	out := make([]State, 0, len(keys))
	for _, k := range keys {
		s := State{Key: k, Role: Role(k, keys)}
		switch {
		case !k.Delete.IsZero() && !t.Before(k.Delete):
			s.State = "deleted"
		case !k.Published(t):
			s.State, s.Next, s.At = "created", "publish", k.Publish
		case !k.Active(t) && t.Before(k.Activate):
			s.State, s.Next, s.At = "published", "activate", k.Activate
		case !k.Active(t):
			s.State, s.Next, s.At = "inactive", "delete", k.Delete
		case k == waiting && t.Before(k.Publish.Add(sch.Known())):
			s.State, s.Next, s.At = "active", "DS to the parent", k.Publish.Add(sch.Known())
		case k == waiting:
			s.State, s.Next = "waiting for DS", "DS to the parent, then rollover --complete"
		case waiting != nil && k.KSK() && k.Inactive.IsZero():
			s.State, s.Next = "active", "retire with rollover --complete"
		case !k.Inactive.IsZero():
			s.State, s.Next, s.At = "active", "inactive", k.Inactive
		default:
			s.State = "active"
		}
		out = append(out, s)
	}
	return out
}

// next says the key's next event after t.
func next(k *Key, t time.Time) string {
	for _, e := range k.events()[1:] {
		if e.at.After(t) {
			return fmt.Sprintf("%s %s", map[string]string{"Publish": "is published", "Activate": "activates",
				"Inactive": "stops signing", "Delete": "is deleted"}[e.name], e.at.UTC().Format(time.DateTime))
		}
	}
	return "has no event ahead"
}

// ActiveZSKAge returns how long the zone's newest ZSK has signed at t, and
// whether a ZSK rollover may start: there is one active ZSK and none ahead.
func ActiveZSKAge(keys []*Key, t time.Time) (time.Duration, bool) {
	zsks := slices.DeleteFunc(slices.Clone(keys), func(k *Key) bool { return k.KSK() })
	if len(zsks) == 0 {
		return 0, false
	}
	var age time.Duration
	for _, k := range zsks {
		if k.Activate.After(t) || !k.Inactive.IsZero() && k.Inactive.After(t) {
			return 0, false
		}
		if k.Active(t) {
			age = t.Sub(k.Activate)
		}
	}
	return age, age > 0
}
