package dnsbench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// dotPort is where the servers that speak DNS over TLS listen for it,
// and dotName the name their certificate is for.
const (
	dotPort = 853
	dotName = "ns1.bench.test"
)

// writeDoTCert writes a self-signed ECDSA P-256 certificate for the edge's
// addresses and its key into dir, for the servers' DNS over TLS: what a
// certificate authority would issue, as dnsperf verifies none.
func writeDoTCert(dir string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("making the dot key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dotName},
		DNSNames: []string{dotName}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", fmt.Errorf("making the dot certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", fmt.Errorf("encoding the dot key: %w", err)
	}
	cert, key = filepath.Join(dir, "dot.crt"), filepath.Join(dir, "dot.key")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{cert, "CERTIFICATE", der}, {key, "PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return "", "", fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return cert, key, nil
}
