package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/dnssec"
)

// TestRollZSKs: a ZSK that reaches its zone's zsk_lifetime is rolled over
// on the zone's schedule, once; a younger one says when it will be due.
func TestRollZSKs(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	zone := func(origin string, split bool, lifetime time.Duration) config.Zone {
		dir := t.TempDir()
		if _, err := dnssec.Generate(dir, origin, dns.ED25519, split, t0); err != nil {
			t.Fatal(err)
		}
		return config.Zone{Origin: origin, DNSSEC: &config.DNSSEC{Keys: dir, Algorithm: "ed25519", Split: split,
			DNSKEYTTL: time.Hour, MaxTTL: day, DSTTL: day, Propagation: time.Hour, ZSKLifetime: lifetime}}
	}
	cfg := &config.Config{Zones: []config.Zone{
		zone("old.test.", true, 30*day),
		zone("young.test.", true, 90*day),
		zone("csk.test.", false, 0),
		{Origin: "plain.test."},
	}}
	now := t0.Add(31 * day)
	rolled, wait := rollZSKs(cfg, now)
	if !slices.Equal(rolled, []string{"old.test."}) || wait != rollCheck {
		t.Fatalf("rolled %v, next look in %v; want the 31-day-old ZSK rolled and a look in %v", rolled, wait, rollCheck)
	}
	keys, err := dnssec.Load(cfg.Zones[0].DNSSEC.Keys, "old.test.")
	if err != nil || len(keys) != 3 {
		t.Fatalf("%d keys after the rollover, %v; want the KSK and two ZSKs", len(keys), err)
	}
	var got []string
	for _, s := range dnssec.States(keys, Schedule(cfg.Zones[0].DNSSEC), now)[1:] {
		got = append(got, s.State+" "+s.Next+" "+s.At.Sub(now).String())
	}
	slices.Sort(got)
	if want := []string{"active inactive 2h0m0s", "published activate 2h0m0s"}; !slices.Equal(got, want) {
		t.Fatalf("ZSKs %v, want %v", got, want)
	}
	// During the rollover nothing more is rolled. After it, the new ZSK
	// is due a lifetime after it began to sign.
	if rolled, _ := rollZSKs(cfg, now.Add(time.Hour)); len(rolled) != 0 {
		t.Fatalf("rolled %v again during the rollover", rolled)
	}
	cfg.Zones = cfg.Zones[:1]
	cfg.Zones[0].DNSSEC.ZSKLifetime = 50 * time.Hour
	if rolled, wait := rollZSKs(cfg, now.Add(2*time.Hour+49*time.Hour+30*time.Minute)); len(rolled) != 0 || wait != 30*time.Minute {
		t.Fatalf("rolled %v, next look in %v; want none rolled and a look when the new ZSK is 50h old", rolled, wait)
	}
}
