package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestKeygen: keygen writes a seed only its owner reads, never over an
// existing file, and prints the host's line, which check then accepts in
// cluster.nats.hosts; check refuses an embedded server beyond loopback
// without TLS, and the old per-role users.
func TestKeygen(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "p1a.nk")
	code, out, errOut := run(bin, "keygen", "--id", "p1a", "--role", "prober", "--region", "r1", "--out", seed)
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	line := regexp.MustCompile(`^p1a: \{ roles: \[prober\], key: (U[A-Z2-7]{55}), region: r1 \}\n$`)
	m := line.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("keygen printed %q", out)
	}
	fi, err := os.Stat(seed)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(seed); !strings.HasPrefix(string(b), "SU") {
		t.Fatalf("seed file holds %q, want a user seed", b)
	}
	if code, _, errOut := run(bin, "keygen", "--id", "p1a", "--role", "prober", "--out", seed); code != 1 || !strings.Contains(errOut, "file exists") {
		t.Fatalf("keygen over an existing seed: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{{"--id", "p.1", "--role", "prober"}, {"--id", "p1", "--role", "resolver"}, {"--id", "p1"}} {
		if code, _, _ := run(bin, append([]string{"keygen", "--out", filepath.Join(dir, "x.nk")}, args...)...); code != 1 {
			t.Errorf("keygen %v: exit %d, want 1", args, code)
		}
	}

	_, aggLine, _ := run(bin, "keygen", "--id", "a1", "--role", "aggregator", "--out", filepath.Join(dir, "a1.nk"))
	cfg := func(name, nats string) string {
		p := filepath.Join(dir, name)
		body := "server:\n  listen: [\"198.18.0.2:53\"]\ncluster:\n  nats:\n    urls: [\"nats://198.18.66.1:4222\"]\n" + nats +
			"    hosts:\n      " + strings.TrimSpace(out) + "\n      " + strings.TrimSpace(aggLine) + "\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if code, stdout, errOut := run(bin, "check", "--skip-host", "--config", cfg("ok.yaml", "")); code != 0 {
		t.Fatalf("check with keygen's lines: exit %d %s%s", code, stdout, errOut)
	}
	open := cfg("open.yaml", "    embed:\n      cluster_listen: 198.18.66.1:6222\n      listen: 127.0.0.1:4222\n")
	code, _, errOut = run(bin, "check", "--skip-host", "--config", open)
	if want := open + ":7: cluster.nats.embed.cluster_listen: 198.18.66.1:6222 is beyond loopback without TLS"; code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("check of an open route port: exit %d, %s; want %s", code, errOut, want)
	}
	insecure := cfg("insecure.yaml", "    embed:\n      cluster_listen: 198.18.66.1:6222\n      listen: 127.0.0.1:4222\n      insecure: true\n")
	if code, _, errOut := run(bin, "check", "--skip-host", "--config", insecure); code != 0 {
		t.Fatalf("check with insecure: true: exit %d, %s", code, errOut)
	}
	users := filepath.Join(dir, "users.yaml")
	os.WriteFile(users, []byte("server:\n  listen: [\"198.18.0.2:53\"]\ncluster:\n  nats:\n    urls: [\"nats://198.18.66.1:4222\"]\n    users:\n      prober: ["+m[1]+"]\n"), 0o600)
	if code, _, errOut := run(bin, "check", "--skip-host", "--config", users); code != 1 || !strings.Contains(errOut, "cluster.nats.users: replaced by cluster.nats.hosts") {
		t.Fatalf("check with the old users: exit %d, %s", code, errOut)
	}
}
