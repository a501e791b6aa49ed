package dnssec

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var testSchedule = Schedule{DNSKEYTTL: time.Hour, MaxTTL: 24 * time.Hour, DSTTL: 2 * time.Hour, Propagation: 5 * time.Minute}

// phase is what the keys do at one time of a rollover: the tags in the
// DNSKEY set, the tags whose signatures cover a zone's set and the DNSKEY
// set, and each key's state.
type phase struct {
	name            string
	at              time.Time
	dnskeys, zsk    []uint16
	ksk             []uint16
	states          []string
	reloadFromFiles bool
}

// checkPhases moves the signer's clock through phases, checking each, and
// that every signature validates against the DNSKEY set it is served
// with.
func checkPhases(t *testing.T, dir string, s *Signer, now *time.Time, phases []phase) {
	t.Helper()
	set := rrs(t, "www.example.test. 60 IN A 198.18.0.1")
	for _, p := range phases {
		*now = p.at
		dnskeys := s.DNSKEYs()
		var tags []uint16
		for _, k := range dnskeys {
			tags = append(tags, k.(*dns.DNSKEY).KeyTag())
		}
		if !slices.Equal(tags, p.dnskeys) {
			t.Errorf("%s: DNSKEY set %v, want %v", p.name, tags, p.dnskeys)
		}
		for _, c := range []struct {
			set  []dns.RR
			want []uint16
		}{{set, p.zsk}, {dnskeys, p.ksk}} {
			sigs, err := s.Sign(c.set)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			var by []uint16
			for _, sig := range sigs {
				sig := sig.(*dns.RRSIG)
				by = append(by, sig.KeyTag)
				i := slices.IndexFunc(dnskeys, func(k dns.RR) bool { return k.(*dns.DNSKEY).KeyTag() == sig.KeyTag })
				if i < 0 {
					t.Errorf("%s: signed by %d, not in the DNSKEY set", p.name, sig.KeyTag)
					continue
				}
				if err := sig.Verify(dnskeys[i].(*dns.DNSKEY), c.set); err != nil {
					t.Errorf("%s: signature by %d does not verify: %v", p.name, sig.KeyTag, err)
				}
			}
			if !slices.Equal(by, c.want) {
				t.Errorf("%s: %s signed by %v, want %v", p.name, dns.TypeToString[c.set[0].Header().Rrtype], by, c.want)
			}
		}
		keys := s.Keys()
		if p.reloadFromFiles {
			var err error
			if keys, err = Load(dir, "example.test."); err != nil {
				t.Fatal(err)
			}
		}
		var states []string
		for _, st := range States(keys, testSchedule, p.at) {
			line := st.Role + " " + st.State
			if st.Next != "" {
				line += ", " + st.Next
			}
			if !st.At.IsZero() {
				line += " " + st.At.Format("15:04")
			}
			states = append(states, line)
		}
		if !slices.Equal(states, p.states) {
			t.Errorf("%s: states\n%s\nwant\n%s", p.name, strings.Join(states, "\n"), strings.Join(p.states, "\n"))
		}
	}
}

func TestZSKRollover(t *testing.T) {
	dir := t.TempDir()
	keys, err := Generate(dir, "example.test.", dns.ECDSAP256SHA256, true, t0)
	if err != nil {
		t.Fatal(err)
	}
	ksk, old := keys[0], keys[1]
	start := t0.Add(10 * time.Hour) // 22:00
	k, err := Rollover(dir, "example.test.", keys, false, testSchedule, start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Rollover(dir, "example.test.", append(keys, k), false, testSchedule, start.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "a ZSK rollover is under way") {
		t.Fatalf("a second rollover during the first: %v", err)
	}
	// The files say it all: a signer made from them follows the schedule.
	loaded, err := Load(dir, "example.test.")
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	s, err := NewSigner("example.test.", loaded, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	kt, ot, nt := ksk.Tag(), old.Tag(), k.Tag()
	both := []uint16{ot, nt}
	if nt < ot {
		both = []uint16{nt, ot}
	}
	withKSK := append([]uint16{kt}, both...)
	activate := start.Add(time.Hour + 5*time.Minute) // 23:05
	deleted := activate.Add(24*time.Hour + 5*time.Minute)
	ordered := func(a, b string) []string { // Load orders ZSKs by tag
		if nt < ot {
			return []string{"KSK active", b, a}
		}
		return []string{"KSK active", a, b}
	}
	checkPhases(t, dir, s, &now, []phase{
		{name: "before", at: t0, dnskeys: []uint16{kt, ot}, zsk: []uint16{ot}, ksk: []uint16{kt}, states: ordered("ZSK active, inactive 23:05", "ZSK created, publish 22:00")},
		{name: "pre-published", at: start, dnskeys: withKSK, zsk: []uint16{ot}, ksk: []uint16{kt},
			states: ordered("ZSK active, inactive 23:05", "ZSK published, activate 23:05")},
		{name: "just before the switch", at: activate.Add(-time.Second), dnskeys: withKSK, zsk: []uint16{ot}, ksk: []uint16{kt},
			states: ordered("ZSK active, inactive 23:05", "ZSK published, activate 23:05")},
		{name: "new ZSK signs", at: activate, dnskeys: withKSK, zsk: []uint16{nt}, ksk: []uint16{kt},
			states: ordered("ZSK inactive, delete 23:10", "ZSK active")},
		{name: "old ZSK deleted", at: deleted, dnskeys: []uint16{kt, nt}, zsk: []uint16{nt}, ksk: []uint16{kt},
			states: ordered("ZSK deleted", "ZSK active"), reloadFromFiles: true},
		{name: "the clock set back", at: start, dnskeys: withKSK, zsk: []uint16{ot}, ksk: []uint16{kt},
			states: ordered("ZSK active, inactive 23:05", "ZSK published, activate 23:05")},
	})
	if age, ok := ActiveZSKAge(loaded, deleted); !ok || age != deleted.Sub(activate) {
		t.Errorf("ZSK age after the rollover: %v %v, want %v", age, ok, deleted.Sub(activate))
	}
	if _, ok := ActiveZSKAge(loaded, start); ok {
		t.Error("a ZSK rollover may start during one")
	}
}

func TestKSKRollover(t *testing.T) {
	for _, split := range []bool{false, true} {
		dir := t.TempDir()
		keys, err := Generate(dir, "example.test.", dns.ED25519, split, t0)
		if err != nil {
			t.Fatal(err)
		}
		old := keys[0]
		start := t0.Add(10 * time.Hour)
		if _, err := Rollover(dir, "example.test.", keys, true, testSchedule, t0); err == nil || !strings.Contains(err.Error(), "start its rollover later") {
			t.Fatalf("split %v: a KSK rollover in the second its KSK was published: %v", split, err)
		}
		k, err := Rollover(dir, "example.test.", keys, true, testSchedule, start)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		if _, err := Rollover(dir, "example.test.", keys, true, testSchedule, start); err == nil || !strings.Contains(err.Error(), "waits for its DS") {
			t.Fatalf("split %v: a second KSK rollover: %v", split, err)
		}
		if ds := DS(keys); len(ds) != 2 {
			t.Fatalf("split %v: %d DS during the rollover, want both", split, len(ds))
		}
		if _, err := Complete(keys, testSchedule, start.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "too early") {
			t.Fatalf("split %v: complete before the new key is known: %v", split, err)
		}
		dsSeen := start.Add(3 * time.Hour) // 01:00
		now := t0
		s, err := NewSigner("example.test.", keys, func() time.Time { return now })
		if err != nil {
			t.Fatal(err)
		}
		ot, nt := old.Tag(), k.Tag()
		kskTags := func(a, b uint16) []uint16 { // as the signer lists them: old first
			return []uint16{a, b}
		}
		role, zsk := "CSK", []uint16{ot}
		var extra []string
		if split {
			role, zsk = "KSK", []uint16{keys[1].Tag()}
			extra = []string{"ZSK active"}
		}
		withZSK := func(tags ...uint16) []uint16 {
			if split {
				return append(tags, keys[1].Tag())
			}
			return tags
		}
		doubled := func(tags ...uint16) []uint16 {
			if split {
				return zsk
			}
			return tags
		}
		states := func(old, newer string) []string {
			return append(append([]string{role + " " + old}, extra...), role+" "+newer)
		}
		// The keys as Generate and Rollover return them: the old KSK,
		// any ZSK, then the new one.
		phases := []phase{
			{name: "before", at: t0, dnskeys: withZSK(ot), zsk: zsk, ksk: []uint16{ot}, states: states("active", "created, publish 22:00")},
			{name: "double signature", at: start, dnskeys: withZSK(ot, nt), zsk: doubled(ot, nt), ksk: kskTags(ot, nt),
				states: states("active, retire with rollover --complete", "active, DS to the parent 23:05")},
			{name: "waiting for DS", at: start.Add(time.Hour + 5*time.Minute), dnskeys: withZSK(ot, nt), zsk: doubled(ot, nt), ksk: kskTags(ot, nt),
				states: states("active, retire with rollover --complete", "waiting for DS, DS to the parent, then rollover --complete")},
		}
		if split {
			// The signer keeps the order of the keys it was given.
			for i := range phases[1:] {
				phases[i+1].dnskeys = []uint16{ot, keys[1].Tag(), nt}
			}
		}
		checkPhases(t, dir, s, &now, phases)
		retired, err := Complete(keys, testSchedule, dsSeen)
		if err != nil || len(retired) != 1 || retired[0] != old {
			t.Fatalf("split %v: complete: %v, %v; want the old key retired", split, retired, err)
		}
		inactive := dsSeen.Add(2*time.Hour + 5*time.Minute) // 03:05
		if !old.Inactive.Equal(inactive) || !old.Delete.Equal(inactive.Add(24*time.Hour+5*time.Minute)) {
			t.Fatalf("split %v: old key inactive %v, deleted %v", split, old.Inactive, old.Delete)
		}
		// A new signer, as a reload makes, from the files Complete wrote.
		loaded, err := Load(dir, "example.test.")
		if err != nil {
			t.Fatal(err)
		}
		s, err = NewSigner("example.test.", loaded, func() time.Time { return now })
		if err != nil {
			t.Fatal(err)
		}
		var lk []uint16 // Load's order: KSKs by tag, then the ZSK
		for _, k := range loaded {
			lk = append(lk, k.Tag())
		}
		only := func(drop uint16) []uint16 {
			return slices.DeleteFunc(slices.Clone(lk), func(t uint16) bool { return t == drop })
		}
		newZSK := []uint16{nt}
		if split {
			newZSK = zsk
		}
		kskNow := slices.DeleteFunc(slices.Clone(lk), func(t uint16) bool { return split && t == keys[1].Tag() })
		doubledNow := kskNow
		if split {
			doubledNow = zsk
		}
		st := func(oldState, newState string) []string {
			var out []string
			for _, k := range loaded {
				switch k.Tag() {
				case ot:
					out = append(out, role+" "+oldState)
				case nt:
					out = append(out, role+" "+newState)
				default:
					out = append(out, "ZSK active")
				}
			}
			return out
		}
		checkPhases(t, dir, s, &now, []phase{
			{name: "DS seen", at: dsSeen, dnskeys: lk, zsk: doubledNow, ksk: kskNow, states: st("active, inactive 03:05", "active")},
			{name: "old inactive", at: inactive, dnskeys: lk, zsk: newZSK, ksk: []uint16{nt}, states: st("inactive, delete 03:10", "active")},
			{name: "old deleted", at: old.Delete, dnskeys: only(ot), zsk: newZSK, ksk: []uint16{nt}, states: st("deleted", "active")},
		})
		if _, err := Complete(loaded, testSchedule, old.Delete); err == nil || err.Error() != "no KSK rollover is under way" {
			t.Fatalf("split %v: complete without a rollover: %v", split, err)
		}
	}
}

func TestTimingInBothFiles(t *testing.T) {
	dir := t.TempDir()
	keys, err := Generate(dir, "example.test.", dns.ECDSAP256SHA256, false, t0)
	if err != nil {
		t.Fatal(err)
	}
	k := keys[0]
	k.Inactive, k.Delete = t0.Add(time.Hour), t0.Add(2*time.Hour)
	if err := k.Save(); err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(k.Path)
	priv, _ := os.ReadFile(strings.TrimSuffix(k.Path, ".key") + ".private")
	for _, want := range []string{"; Inactive: 20261201130000 (Tue Dec  1 13:00:00 2026)\n", "; Delete: 20261201140000 ("} {
		if !strings.Contains(string(pub), want) {
			t.Errorf(".key file lacks %q:\n%s", want, pub)
		}
	}
	if !strings.HasSuffix(string(priv), "Created: 20261201120000\nPublish: 20261201120000\nActivate: 20261201120000\nInactive: 20261201130000\nDelete: 20261201140000\n") ||
		strings.Count(string(priv), "Created:") != 1 {
		t.Errorf(".private file's timing:\n%s", priv)
	}
	if fi, err := os.Stat(strings.TrimSuffix(k.Path, ".key") + ".private"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key after saving: %v, mode %v", err, fi.Mode().Perm())
	}
	loaded, err := Load(dir, "example.test.")
	if err != nil || len(loaded) != 1 || !loaded[0].Inactive.Equal(k.Inactive) || !loaded[0].Delete.Equal(k.Delete) {
		t.Fatalf("loaded %v, %v; want the saved timing", loaded, err)
	}
}
