package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

// serveConfig parses a config of server keys (indented under server:) in
// dir, with the API on a free loopback port, and serves s's API with
// api.Serve as the daemon does. It returns the base URL, or the error.
func serveConfig(t *testing.T, s *server, dir, keys string) (string, error) {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(dir, "steadydns.yaml"), []byte("server:\n  listen: [\"198.18.0.2:53\"]\n"+keys))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.API = "127.0.0.1:0" // a free port, which the config does not take
	srv, addr, err := api.Serve(api.Handler(s, s.metrics), cfg)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	scheme := "http"
	if cfg.Server.APITLS != nil {
		scheme = "https"
	}
	return scheme + "://" + addr.String(), nil
}

// TestStateToken: without api_token_file the write token is made in
// state_dir at the first start, 0600 and 32 random bytes in hex, and
// taken again at the next; writes need it.
func TestStateToken(t *testing.T) {
	s := newServer(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	keys := "  state_dir: " + state + "\n"
	base, err := serveConfig(t, s, dir, keys)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(state, api.TokenFile)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %04o, want 0600", path, info.Mode().Perm())
	}
	token, err := api.ReadToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(token); err != nil || len(b) != 32 {
		t.Errorf("token %q: want 32 bytes in hex", token)
	}
	sendAll(t, base, []request{
		{"admin without a token", http.MethodPut, "/api/v1/checks/web1/admin", "down", nil, http.StatusUnauthorized},
		{"admin with a wrong token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth(strings.Repeat("0", 64)), http.StatusUnauthorized},
		{"admin with the token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth(token), http.StatusNoContent},
	})

	// A second start takes the same token.
	base, err = serveConfig(t, s, dir, keys)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := api.ReadToken(path); err != nil || again != token {
		t.Errorf("the token after a second start: %q %v, want %q", again, err, token)
	}
	sendAll(t, base, []request{{"admin with the token after a restart", http.MethodPut, "/api/v1/checks/web1/admin", "auto", auth(token), http.StatusNoContent}})

	// One that others may read is refused, naming the key and the fix.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := serveConfig(t, s, dir, keys); err == nil || !strings.Contains(err.Error(), "server.state_dir: reading the api token: "+path+" is open to others") || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a token file of mode 0644: %v", err)
	}
}

// TestTokenFiles: api_token_file holds the write token and
// api_read_token_file the read token, which must differ.
func TestTokenFiles(t *testing.T) {
	s := newServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "write.token"), "w-token\n")
	writeFile(t, filepath.Join(dir, "read.token"), "  r-token \n")
	writeFile(t, filepath.Join(dir, "same.token"), "w-token")
	writeFile(t, filepath.Join(dir, "spaced.token"), "w token")
	state := "  state_dir: " + filepath.Join(dir, "state") + "\n"
	base, err := serveConfig(t, s, dir, state+"  api_token_file: write.token\n  api_read_token_file: read.token\n")
	if err != nil {
		t.Fatal(err)
	}
	sendAll(t, base, []request{
		{"checks without a token", http.MethodGet, "/api/v1/checks", "", nil, http.StatusUnauthorized},
		{"checks with the read token", http.MethodGet, "/api/v1/checks", "", auth("r-token"), http.StatusOK},
		{"metrics with the read token", http.MethodGet, "/metrics", "", auth("r-token"), http.StatusOK},
		{"healthz without a token", http.MethodGet, "/healthz", "", nil, http.StatusOK},
		{"admin with the read token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth("r-token"), http.StatusUnauthorized},
		{"admin with the write token", http.MethodPut, "/api/v1/checks/web1/admin", "down", auth("w-token"), http.StatusNoContent},
	})
	if _, err := os.Stat(filepath.Join(dir, "state", api.TokenFile)); err == nil {
		t.Errorf("a token was made in state_dir although api_token_file is set")
	}
	for _, c := range []struct{ name, keys, want string }{
		{"the same token twice", "  api_token_file: write.token\n  api_read_token_file: same.token\n", "server.api_read_token_file: holds the write token"},
		{"white space within", "  api_token_file: spaced.token\n", "server.api_token_file: reading the api token: " + filepath.Join(dir, "spaced.token") + " holds white space"},
	} {
		if _, err := serveConfig(t, s, dir, state+c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestServeTLS: with api_tls the API answers HTTPS with the certificate
// and a plain HTTP request is not served.
func TestServeTLS(t *testing.T) {
	s := newServer(t)
	dir := t.TempDir()
	certPEM := writeCert(t, dir)
	base, err := serveConfig(t, s, dir, "  state_dir: "+filepath.Join(dir, "state")+"\n  api_tls:\n    cert: api.crt\n    key: api.key\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base %s", base)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(base + "/api/v1/checks")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Errorf("GET over HTTPS: %s, tls %v", resp.Status, resp.TLS != nil)
	}
	resp, err = http.Get("http://" + strings.TrimPrefix(base, "https://") + "/api/v1/checks")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET over plain HTTP of an HTTPS API: %s", resp.Status)
		}
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and localhost
// and its key to dir as api.crt and api.key, and returns the certificate.
func writeCert(t *testing.T, dir string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "steadydns api test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	writeFile(t, filepath.Join(dir, "api.crt"), string(certPEM))
	writeFile(t, filepath.Join(dir, "api.key"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
	return certPEM
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
