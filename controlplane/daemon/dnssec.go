package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/dnssec"
	"github.com/steadydns/steadydns/controlplane/zone"
)

// MakeKeys creates the keys of each zone of cfg signed online whose key
// directory holds none, or of the one zone only when only is set, and
// returns the keys of those zones. serve runs it for a config of its own;
// a config from the bucket never makes keys, since every signing host of
// a fleet must sign with the same ones.
func MakeKeys(cfg *config.Config, only string) ([]*dnssec.Key, error) {
	var all []*dnssec.Key
	found := false
	for i, zc := range cfg.Zones {
		if only != "" && zc.Origin != only {
			continue
		}
		found = true
		key := fmt.Sprintf("zones[%d].dnssec", i)
		if zc.DNSSEC == nil {
			if only != "" {
				return nil, cfg.Errorf(key, "zone %s is not signed: it has no dnssec", zc.Origin)
			}
			continue
		}
		alg, _ := dnssec.Algorithm(zc.DNSSEC.Algorithm) // the config checked it
		keys, err := dnssec.Ensure(zc.DNSSEC.Keys, zc.Origin, alg, zc.DNSSEC.Split, time.Now())
		if err != nil {
			return nil, cfg.Errorf(key+".keys", "%v", err)
		}
		all = append(all, keys...)
	}
	if only != "" && !found {
		return nil, fmt.Errorf("no zone %s in the config", only)
	}
	return all, nil
}

// signOnline signs z, the zone of zones[i], with its keys. Without keys it
// fails when must is set, rather than serve a signed zone unsigned;
// otherwise (check, admin) the zone stays unsigned.
func signOnline(cfg *config.Config, i int, z *zone.Zone, must bool) error {
	zc := cfg.Zones[i]
	key := fmt.Sprintf("zones[%d].dnssec.keys", i)
	keys, err := dnssec.Load(zc.DNSSEC.Keys, zc.Origin)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return cfg.Errorf(key, "%v", err)
	}
	if len(keys) == 0 {
		if must {
			return cfg.Errorf(key, "no keys for %s in %s: copy them there, or run steadydns dnssec keygen", zc.Origin, zc.DNSSEC.Keys)
		}
		return nil
	}
	for _, k := range keys {
		k.DNSKEY.Hdr.Ttl = uint32(zc.DNSSEC.DNSKEYTTL / time.Second)
	}
	s, err := dnssec.NewSigner(zc.Origin, keys, time.Now)
	if err != nil {
		return cfg.Errorf(key, "%v", err)
	}
	if err := z.SignOnline(s); err != nil {
		return cfg.Errorf(fmt.Sprintf("zones[%d].dnssec", i), "%v", err)
	}
	return nil
}

// Schedule is the rollover schedule of a zone's dnssec section.
func Schedule(c *config.DNSSEC) dnssec.Schedule {
	return dnssec.Schedule{DNSKEYTTL: c.DNSKEYTTL, MaxTTL: c.MaxTTL, DSTTL: c.DSTTL, Propagation: c.Propagation}
}

// rollCheck bounds the wait between two looks at the ZSKs' ages, so that
// keys changed by hand are seen too.
const rollCheck = time.Hour

// rollZSKs starts a ZSK rollover in each zone of cfg whose active ZSK has
// reached its zsk_lifetime at now. It returns the zones it rolled and how
// long until it should look again.
func rollZSKs(cfg *config.Config, now time.Time) ([]string, time.Duration) {
	var rolled []string
	wait := rollCheck
	for _, zc := range cfg.Zones {
		if zc.DNSSEC == nil || zc.DNSSEC.ZSKLifetime == 0 {
			continue
		}
		keys, err := dnssec.Load(zc.DNSSEC.Keys, zc.Origin)
		if err != nil {
			slog.Error("reading keys for the ZSK's lifetime", "zone", zc.Origin, "error", err)
			continue
		}
		age, ok := dnssec.ActiveZSKAge(keys, now)
		if !ok {
			// A rollover is under way: the new ZSK's life starts
			// within a lifetime.
			wait = min(wait, zc.DNSSEC.ZSKLifetime)
			continue
		}
		if left := zc.DNSSEC.ZSKLifetime - age; left > 0 {
			wait = min(wait, left)
			continue
		}
		k, err := dnssec.Rollover(zc.DNSSEC.Keys, zc.Origin, keys, false, Schedule(zc.DNSSEC), now)
		if err != nil {
			slog.Error("rolling the ZSK over", "zone", zc.Origin, "error", err)
			continue
		}
		slog.Info("ZSK rollover started", "zone", zc.Origin, "key", k.Tag(), "signs_from", k.Activate)
		rolled = append(rolled, zc.Origin)
		wait = min(wait, zc.DNSSEC.ZSKLifetime)
	}
	return rolled, wait
}
