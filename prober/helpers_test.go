package prober

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/netip"
	"testing"
	"time"
)

// checkOf returns a check of type typ to target with test-friendly timing,
// changed by mods.
func checkOf(typ Type, target netip.AddrPort, mods ...func(*Spec)) Spec {
	s := Spec{
		Type: typ, Target: target.Addr().String(), Port: target.Port(),
		Interval: time.Second, Timeout: 500 * time.Millisecond,
	}
	switch typ {
	case HTTP, HTTPS:
		s.Path, s.Method = "/", "GET"
		s.ExpectStatus = []StatusRange{{Lo: 200, Hi: 399}}
		s.TLSVerify = typ == HTTPS
	case DNS:
		s.QType = 1
	}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// runCheck builds s (sockets through ns) and runs it once.
func runCheck(t *testing.T, ns Netns, s Spec) Result {
	t.Helper()
	ch, err := NewIn(ns, s, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	return ch.Check(context.Background())
}

// expect fails t unless r has the wanted verdict and reason.
func expect(t *testing.T, r Result, healthy bool, reason Reason, detail string) {
	t.Helper()
	if r.Healthy != healthy || r.Reason != reason || detail != "" && r.Detail != detail {
		t.Errorf("got healthy=%v reason=%s detail=%q, want healthy=%v reason=%s detail=%q",
			r.Healthy, r.Reason, r.Detail, healthy, reason, detail)
	}
}

// addrOfListener is a listener's address as an AddrPort.
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort()
	case *net.UDPAddr:
		return a.AddrPort()
	}
	panic("not an IP address: " + a.String())
}

// selfSigned makes a certificate for ips that no one vouches for, so only
// a check with verification off accepts it.
func selfSigned(t *testing.T, ips ...netip.Addr) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "backend.test"},
		DNSNames:     []string{"backend.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// listenTCP listens on addr, through ns when it is set, and closes the
// listener when the test ends.
func listenTCP(t *testing.T, ns Netns, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := in(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// listenUDP is listenTCP for UDP.
func listenUDP(t *testing.T, ns Netns, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	err := in(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

func in(ns Netns, fn func() error) error {
	return (&probe{ns: ns}).in(fn)
}
