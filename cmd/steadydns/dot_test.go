package main

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadydns/steadydns/testenv"
)

const dotConfig = `server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0}
  tls:
    listen: ["198.18.0.2:853"]
    cert: dot.crt
    key: dot.key
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  dead: { type: tcp, target: 198.18.1.1, port: 81, interval: 200ms, timeout: 100ms }
records:
  - name: www.example.test.
    type: A
    answers:
      - value: 198.18.2.1
      - { value: 198.18.2.2, check: dead }
aggregation:
  push_interval: 100ms
`

// TestDoTEndToEnd: `serve` with server.tls answers DNS over TLS on port
// 853 with the health-checked answer (kdig, verifying the certificate,
// and with the idle timeout for edns-tcp-keepalive); a reload presents
// a renewed certificate to new connections; a reload with a broken key
// is refused and the last good certificate stays.
func TestDoTEndToEnd(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	dir := t.TempDir()
	writeCert(t, dir, "first", "ns1.example.test")
	writeCert(t, dir, "renewed", "ns1.example.test")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	e := newEdgeHost(t, env, bin, dotConfig, map[string]string{"example.test.zone": crashZone,
		"dot.crt": read("first.crt"), "dot.key": read("first.key")})
	if out, err := env.Edge.Command(bin, "check", "--config", e.cfg).CombinedOutput(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	cmd := e.serve("serve")
	waitServing(t, env)

	ca := filepath.Join(dir, "first.crt")
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := env.Client.Command("kdig", "+tls-ca="+ca, "+tls-hostname=ns1.example.test", "+ednsopt=11",
			"@198.18.0.2", "www.example.test", "A").CombinedOutput()
		s := string(out)
		if err == nil && strings.Contains(s, "198.18.2.1") && !strings.Contains(s, "198.18.2.2") {
			// The keepalive's TIMEOUT: idle_timeout's default, 10 s, in
			// units of 100 ms.
			if !strings.Contains(s, ";; TLS session (TLS1.3)") || !strings.Contains(s, ";; Option (11): 0064") {
				t.Errorf("kdig over TLS shows no TLS 1.3 session or no keepalive of 10 s:\n%s", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kdig over TLS: %v\n%s\nwant 198.18.2.1 alone, the checked answer down", err, s)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// served is the certificate a new connection is shown.
	served := func() []byte {
		var der []byte
		err := env.Client.Do(func() error {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", "198.18.0.2:853",
				&tls.Config{ServerName: "ns1.example.test", InsecureSkipVerify: true})
			if err != nil {
				return err
			}
			defer c.Close()
			der = c.ConnectionState().PeerCertificates[0].Raw
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	pemDER := func(name string) []byte {
		c, err := tls.X509KeyPair([]byte(read(name+".crt")), []byte(read(name+".key")))
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	if !bytes.Equal(served(), pemDER("first")) {
		t.Fatal("the first certificate is not the one served")
	}
	reload := func() {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(e.dir, "dot.crt"), read("renewed.crt"))
	write(t, filepath.Join(e.dir, "dot.key"), read("renewed.key"))
	reload()
	waitFor(t, "the renewed certificate shown to new connections after a reload", func() bool {
		return bytes.Equal(served(), pemDER("renewed"))
	})

	write(t, filepath.Join(e.dir, "dot.key"), "not a key\n")
	reload()
	waitFor(t, "the refused reload counted", func() bool {
		return strings.Contains(getText(t, env, "/metrics"), "\nsteadydns_reload_errors_total 1\n")
	})
	if !bytes.Equal(served(), pemDER("renewed")) {
		t.Error("a refused reload changed the certificate served")
	}
	// detach, at the test's end, reads the config too.
	write(t, filepath.Join(e.dir, "dot.key"), read("renewed.key"))
}
