package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

func TestFleetLine(t *testing.T) {
	got := fleetLine(api.FleetView{ID: "a1", Roles: []string{"aggregator"}, Cell: "eu", ConfigSource: "nats", ConfigHash: "00000000000000ff", Revision: 3,
		Capacity: []api.CapacityView{{Resource: "aggregator_checker_checks", Used: 8192, Limit: 131072}}})
	want := "host a1 (aggregator), cell eu, aggregator_checker_checks 8192 of 131072; config nats, hash 00000000000000ff, revision 3"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestDialAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:9153":        "127.0.0.1:9153",
		"0.0.0.0:9153":          "127.0.0.1:9153",
		"[::]:9153":             "[::1]:9153",
		"[fd53::2]:9153":        "[fd53::2]:9153",
		"api.example.test:9153": "api.example.test:9153",
	} {
		if got := dialAddr(addr); got != want {
			t.Errorf("dialAddr(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestStatusTLS: status reaches an API over HTTPS with the config's
// certificate, pinned (it names api.example.test only, and is reached at
// 127.0.0.1), and sends the config's read token; a server presenting
// another certificate is refused.
func TestStatusTLS(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "api", "api.example.test")
	writeCert(t, dir, "other", "api.example.test")
	write(t, filepath.Join(dir, "read.token"), "r-token\n")
	var gotAuth []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/records", func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		io.WriteString(w, `{"table": {"version": 3}, "records": [{"name": "www.example.test.", "type": "A", "answers": [{"value": "198.18.1.1", "in": true}]}]}`)
	})
	mux.HandleFunc("GET /api/v1/checks", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"fleet": {"id": "e1", "roles": ["edge"]}, "checks": []}`)
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"events": []}`)
	})
	server := func(cert string) string {
		return "server:\n  listen: [\"198.18.0.2:53\"]\n  state_dir: " + filepath.Join(dir, "state") +
			"\n  api_read_token_file: read.token\n  api_tls:\n    cert: " + cert + ".crt\n    key: " + cert + ".key\n"
	}
	cfg, err := config.Parse(filepath.Join(dir, "serve.yaml"), []byte(server("api")))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.API = "127.0.0.1:0" // a free port, which the config does not take
	srv, addr, err := api.Serve(mux, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })

	path := filepath.Join(dir, "steadydns.yaml")
	write(t, path, server("api")+"  api: "+addr.String()+"\n")
	if err := status([]string{"--config", path}); err != nil {
		t.Fatalf("status over HTTPS: %v", err)
	}
	if len(gotAuth) != 1 || gotAuth[0] != "Bearer r-token" {
		t.Errorf("the server saw Authorization %q, want the read token", gotAuth)
	}

	other := filepath.Join(dir, "other.yaml")
	write(t, other, server("other")+"  api: "+addr.String()+"\n")
	if err := status([]string{"--config", other}); err == nil || !strings.Contains(err.Error(), "a certificate other than the one in "+filepath.Join(dir, "other.crt")) {
		t.Errorf("status against a server with another certificate: %v", err)
	}
	// Without the config it has neither the certificate nor the token.
	if err := status([]string{"--api", addr.String()}); err == nil {
		t.Error("status without the config succeeded")
	}
}

// writeCert writes a self-signed certificate for host and its key to dir
// as NAME.crt and NAME.key.
func writeCert(t *testing.T, dir, name, host string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{host},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, name+".crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, filepath.Join(dir, name+".key"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
