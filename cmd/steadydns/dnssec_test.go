package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDNSSECCommands(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte("@ 300 SOA ns hostmaster 1 2 3 4 5\n@ 300 NS ns\nns 300 A 198.18.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("server:\n  listen: [\"198.18.0.2:53\"]\nzones:\n  - origin: example.test.\n    file: z.zone\n    dnssec:\n      keys: keys\n      split: true\n  - origin: plain.test.\n    file: z.zone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var b bytes.Buffer
		err := dnssecCmd(args, &b)
		return b.String(), err
	}
	if out, err := run("status", "--config", cfg); err != nil || !strings.Contains(out, "no keys") {
		t.Fatalf("status before keygen: %q, %v", out, err)
	}
	out, err := run("keygen", "--config", cfg, "--zone", "Example.Test")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "KSK ") || !strings.HasPrefix(lines[1], "ZSK ") {
		t.Fatalf("keygen printed %q, want a KSK and a ZSK", out)
	}
	if fi, err := os.Stat(filepath.Join(dir, "keys")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("key directory: %v", err)
	}
	again, err := run("keygen", "--config", cfg, "--zone", "example.test.")
	if err != nil || again != out {
		t.Fatalf("keygen again: %q, %v; want the same keys listed", again, err)
	}
	out, err = run("ds", "--config", cfg, "--zone", "example.test")
	if err != nil {
		t.Fatal(err)
	}
	rr, err := dns.NewRR(out)
	if ds, ok := rr.(*dns.DS); err != nil || !ok || ds.DigestType != dns.SHA256 || !strings.Contains(lines[0], " "+strconv.Itoa(int(ds.KeyTag))+" ") {
		t.Fatalf("ds printed %q (%v), want the KSK's SHA-256 DS", out, err)
	}
	out, err = run("status", "--config", cfg, "--zone", "example.test")
	if err != nil || strings.Count(out, " active ") != 2 || !strings.Contains(out, "ecdsap256sha256") {
		t.Fatalf("status: %q, %v; want two active keys", out, err)
	}
	if _, err := run("ds", "--config", cfg, "--zone", "plain.test"); err == nil || err.Error() != "zone plain.test. is not signed: it has no dnssec" {
		t.Fatalf("ds of an unsigned zone: %v", err)
	}

	// Rollovers, at times of the test's choosing: a day and two after the
	// keys were made. The schedule is the config's defaults.
	day := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	at := func(d time.Duration) string { return day.Add(d).Format("20060102150405") }
	if out, err = run("rollover", "--config", cfg, "--zone", "example.test", "--at", at(0)); err != nil {
		t.Fatal(err)
	}
	activate := day.Add(2 * time.Hour).Format(time.DateTime)
	if !strings.Contains(out, "active          inactive "+activate+"\n") || !strings.Contains(out, "published       activate "+activate+"\n") {
		t.Fatalf("ZSK rollover printed\n%s\nwant the old ZSK inactive and the new one active at %s", out, activate)
	}
	if _, err := run("rollover", "--config", cfg, "--zone", "example.test", "--key", "csk"); err == nil || err.Error() != "--key csk: zone example.test. has no CSK" {
		t.Fatalf("rolling a CSK of a split zone: %v", err)
	}
	if out, err = run("rollover", "--config", cfg, "--zone", "example.test", "--key", "ksk", "--at", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "retire with rollover --complete") || !strings.Contains(out, "DS to the parent "+day.Add(3*time.Hour).Format(time.DateTime)) {
		t.Fatalf("KSK rollover printed\n%s", out)
	}
	if out, err = run("ds", "--config", cfg, "--zone", "example.test"); err != nil || strings.Count(out, "\tDS\t") != 2 {
		t.Fatalf("ds during a KSK rollover: %q, %v; want both", out, err)
	}
	if _, err := run("rollover", "--config", cfg, "--zone", "example.test", "--complete", "--at", at(2*time.Hour)); err == nil || !strings.Contains(err.Error(), "too early") {
		t.Fatalf("completing before the new KSK is known: %v", err)
	}
	if out, err = run("rollover", "--config", cfg, "--zone", "example.test", "--complete", "--at", at(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	oldKSK := strings.Fields(lines[0])[1]
	if !strings.Contains(out, fmt.Sprintf("KSK  %-5s ecdsap256sha256  active          inactive ", oldKSK)+day.Add(29*time.Hour).Format(time.DateTime)) {
		t.Fatalf("completed rollover printed\n%s\nwant the old KSK %s inactive a DS TTL and an hour later", out, oldKSK)
	}
	if out, err = run("ds", "--config", cfg, "--zone", "example.test"); err != nil || strings.Count(out, "\tDS\t") != 1 || strings.Contains(out, "\tDS\t"+oldKSK+" ") {
		t.Fatalf("ds after the KSK rollover: %q, %v; want only the new key's", out, err)
	}
}
