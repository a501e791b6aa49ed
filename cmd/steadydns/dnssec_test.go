package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
}
