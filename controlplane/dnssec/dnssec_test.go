package dnssec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestGenerateWritesBINDFiles(t *testing.T) {
	for _, tc := range []struct {
		alg   uint8
		split bool
		roles []string
	}{
		{dns.ECDSAP256SHA256, false, []string{"CSK"}},
		{dns.ED25519, false, []string{"CSK"}},
		{dns.ECDSAP256SHA256, true, []string{"KSK", "ZSK"}},
	} {
		dir := filepath.Join(t.TempDir(), "keys")
		keys, err := Generate(dir, "Example.TEST.", tc.alg, tc.split, t0)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("key directory: %v, mode %v, want 0700", err, fi.Mode().Perm())
		}
		var roles []string
		for _, k := range keys {
			roles = append(roles, Role(k, keys))
			base := filepath.Join(dir, fmt.Sprintf("Kexample.test.+%03d+%05d", tc.alg, k.Tag()))
			if k.Path != base+".key" {
				t.Errorf("key path %s, want %s.key", k.Path, base)
			}
			fi, err := os.Stat(base + ".private")
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("private key: %v, mode %v, want 0600", err, fi.Mode().Perm())
			}
			priv, _ := os.ReadFile(base + ".private")
			if !strings.HasPrefix(string(priv), "Private-key-format: v1.3\n") {
				t.Errorf("private key file starts %q", string(priv)[:30])
			}
		}
		if strings.Join(roles, ",") != strings.Join(tc.roles, ",") {
			t.Errorf("alg %d split %v: roles %v, want %v", tc.alg, tc.split, roles, tc.roles)
		}
		loaded, err := Load(dir, "example.test.")
		if err != nil {
			t.Fatal(err)
		}
		if len(loaded) != len(keys) {
			t.Fatalf("loaded %d keys, want %d", len(loaded), len(keys))
		}
		for i, k := range loaded {
			want := keys[i]
			if k.Tag() != want.Tag() || !k.Created.Equal(t0) || !k.Activate.Equal(t0) || !k.Publish.Equal(t0) {
				t.Errorf("loaded key %d created %v activate %v publish %v, want tag %d at %v", k.Tag(), k.Created, k.Activate, k.Publish, want.Tag(), t0)
			}
		}
	}
}

func TestEnsure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	first, err := Ensure(dir, "example.test.", dns.ECDSAP256SHA256, false, t0)
	if err != nil || len(first) != 1 {
		t.Fatalf("Ensure on an empty dir: %d keys, %v", len(first), err)
	}
	again, err := Ensure(dir, "example.test.", dns.ECDSAP256SHA256, true, t0)
	if err != nil || len(again) != 1 || again[0].Tag() != first[0].Tag() {
		t.Fatalf("Ensure with keys: %d keys, %v; want the one key made first", len(again), err)
	}
	if _, err := Ensure(dir, "example.test.", dns.ED25519, false, t0); err == nil || !strings.Contains(err.Error(), "has algorithm ECDSAP256SHA256, the config names ED25519") {
		t.Fatalf("Ensure with another algorithm: %v", err)
	}
	// Another zone's keys in the same directory are not this zone's.
	other, err := Ensure(dir, "other.test.", dns.ED25519, false, t0)
	if err != nil || len(other) != 1 || other[0].DNSKEY.Algorithm != dns.ED25519 {
		t.Fatalf("Ensure for another zone: %v", err)
	}
}

func TestDSOfKSKOnly(t *testing.T) {
	keys, err := Generate(t.TempDir(), "example.test.", dns.ECDSAP256SHA256, true, t0)
	if err != nil {
		t.Fatal(err)
	}
	ds := DS(keys)
	if len(ds) != 1 || ds[0].KeyTag != keys[0].Tag() || ds[0].DigestType != dns.SHA256 || len(ds[0].Digest) != 64 {
		t.Fatalf("DS %v, want one SHA-256 DS of the KSK %d", ds, keys[0].Tag())
	}
}

func testSigner(t *testing.T, split bool, now *time.Time) *Signer {
	t.Helper()
	keys, err := Generate(t.TempDir(), "example.test.", dns.ECDSAP256SHA256, split, t0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner("example.test.", keys, func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rrs(t *testing.T, lines ...string) []dns.RR {
	t.Helper()
	var out []dns.RR
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr)
	}
	return out
}

func verify(t *testing.T, s *Signer, sigs, set []dns.RR, want uint16) {
	t.Helper()
	if len(sigs) != 1 {
		t.Fatalf("%d signatures, want 1", len(sigs))
	}
	sig := sigs[0].(*dns.RRSIG)
	if sig.KeyTag != want {
		t.Fatalf("signed by %d, want %d", sig.KeyTag, want)
	}
	for _, k := range s.DNSKEYs() {
		if k.(*dns.DNSKEY).KeyTag() == want {
			if err := sig.Verify(k.(*dns.DNSKEY), set); err != nil {
				t.Fatalf("signature does not verify: %v", err)
			}
			return
		}
	}
	t.Fatalf("no DNSKEY %d", want)
}

func TestSignerSignsWithTheRightKey(t *testing.T) {
	now := t0
	s := testSigner(t, true, &now)
	ksk, zsk := s.keys[0].Tag(), s.keys[1].Tag()
	set := rrs(t, "www.example.test. 60 IN A 198.18.0.1", "www.example.test. 60 IN A 198.18.0.2")
	sigs, err := s.Sign(set)
	if err != nil {
		t.Fatal(err)
	}
	verify(t, s, sigs, set, zsk)
	sig := sigs[0].(*dns.RRSIG)
	if exp := time.Unix(int64(sig.Expiration), 0); exp.Before(now.Add(Validity-Jitter)) || exp.After(now.Add(Validity+Jitter)) {
		t.Errorf("expiration %v not within %v ± %v of %v", exp, Validity, Jitter, now)
	}
	if inc := time.Unix(int64(sig.Inception), 0); !inc.Equal(now.Add(-time.Hour)) {
		t.Errorf("inception %v, want an hour before %v", inc, now)
	}
	keys, err := s.Sign(s.DNSKEYs())
	if err != nil {
		t.Fatal(err)
	}
	verify(t, s, keys, s.DNSKEYs(), ksk)
}

func TestSignerCache(t *testing.T) {
	now := t0
	s := testSigner(t, false, &now)
	a := rrs(t, "www.example.test. 60 IN A 198.18.0.1", "www.example.test. 60 IN A 198.18.0.2")
	b := rrs(t, "WwW.example.test. 60 IN A 198.18.0.2", "WwW.example.test. 60 IN A 198.18.0.1")
	sa, _ := s.Sign(a)
	sb, _ := s.Sign(b)
	if sb[0].(*dns.RRSIG).Signature != sa[0].(*dns.RRSIG).Signature {
		t.Fatal("the same set in another order and case was signed again")
	}
	if sb[0].Header().Name != "WwW.example.test." {
		t.Errorf("signature owned by %s, want the set's spelling", sb[0].Header().Name)
	}
	verify(t, s, sb, b, s.keys[0].Tag())
	other, _ := s.Sign(rrs(t, "www.example.test. 60 IN A 198.18.0.1"))
	if other[0].(*dns.RRSIG).Signature == sa[0].(*dns.RRSIG).Signature {
		t.Fatal("a different set got the same signature")
	}
	// Renews names the second from which Sign makes them again.
	refresh, rekey := s.Renews(sa)
	if refresh.Before(t0.Add(Refresh-Jitter/2)) || refresh.After(t0.Add(Refresh+Jitter/2)) || !rekey.IsZero() {
		t.Fatalf("renews at %v, rekey %v; want within Refresh ± Jitter/2 of %v, no key event", refresh, rekey, t0)
	}
	now = refresh.Add(-time.Second)
	if again, _ := s.Sign(a); again[0].(*dns.RRSIG).Signature != sa[0].(*dns.RRSIG).Signature {
		t.Fatal("signed again before the refresh")
	}
	now = refresh
	fresh, _ := s.Sign(a)
	if fresh[0].(*dns.RRSIG).Signature == sa[0].(*dns.RRSIG).Signature {
		t.Fatal("not signed again after the refresh time")
	}
	if inc := time.Unix(int64(fresh[0].(*dns.RRSIG).Inception), 0); !inc.Equal(now.Add(-time.Hour)) {
		t.Errorf("refreshed inception %v, want %v", inc, now.Add(-time.Hour))
	}
}

func TestSignerTiming(t *testing.T) {
	dir := t.TempDir()
	keys, err := Generate(dir, "example.test.", dns.ED25519, true, t0)
	if err != nil {
		t.Fatal(err)
	}
	keys[1].Activate = t0.Add(time.Hour) // a ZSK published ahead of use
	s, err := NewSigner("example.test.", keys, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if len(s.DNSKEYs()) != 2 {
		t.Fatalf("%d keys published, want 2", len(s.DNSKEYs()))
	}
	set := rrs(t, "example.test. 60 IN TXT \"x\"")
	sigs, _ := s.Sign(set)
	verify(t, s, sigs, set, keys[0].Tag()) // the KSK signs while no ZSK is active
	if _, rekey := s.Renews(sigs); !rekey.Equal(t0.Add(time.Hour)) {
		t.Errorf("rekey at %v, want the ZSK's activation %v", rekey, t0.Add(time.Hour))
	}
	if _, err := NewSigner("example.test.", keys[1:], func() time.Time { return t0 }); err == nil {
		t.Fatal("a signer without a KSK was made")
	}
}
