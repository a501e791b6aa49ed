package fallback

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testCert is a self-signed certificate for ns1.example.test and the
// server's address, and a pool that trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ns1.example.test"},
		DNSNames: []string{"ns1.example.test"}, IPAddresses: []net.IP{serverAddr.AsSlice()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// dialTLS opens a DNS-over-TLS connection from src to r, verifying the
// server's certificate against pool, and completes the handshake.
func (r *tcpRig) dialTLS(t *testing.T, pool *x509.CertPool) *tls.Conn {
	t.Helper()
	raw := r.dialTo(t, serverAddr, r.tlsAddr)
	c := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "ns1.example.test", NextProtos: []string{"dot"}})
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// TestTLS: DNS over TLS (RFC 7858) answers pipelined queries in order,
// sent in records cut anywhere, as UDP does, with the "dot" protocol negotiated; a client
// that speaks no TLS is closed and counted; and TLS and plain TCP
// connections share the limits.
func TestTLS(t *testing.T) {
	env := tcpEnv(t)
	cert, pool := testCert(t)
	v, _ := exampleView(t)
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"dot"}}
	r := startTCPWith(t, env, TCPLimits{MaxPerPrefix: 2, IdleTimeout: time.Minute}, v, conf)

	c := r.dialTLS(t, pool)
	if p := c.ConnectionState().NegotiatedProtocol; p != "dot" {
		t.Errorf("negotiated %q, want dot", p)
	}
	client := c.LocalAddr().(*net.TCPAddr).AddrPort()
	var burst []byte
	var want [][]byte
	for i, name := range []string{"static.example.test.", "web.example.test.", "example.test.", "nothere.example.test.", "big.example.test."} {
		qtype := dns.TypeA
		if name == "example.test." {
			qtype = dns.TypeMX
		}
		m := query(name, qtype)
		m.Id = uint16(i)
		m.SetEdns0(1232, false)
		withKeepalive(m)
		raw := pack(t, m)
		// Over UDP the keepalive is ignored; over TLS, as over TCP, it is
		// answered, and nothing is truncated.
		udp := query(name, qtype)
		udp.Id = uint16(i)
		udp.SetEdns0(65535, false)
		u := r.s.AnswerDatagram(pack(t, udp), client)
		var um dns.Msg
		if err := um.Unpack(u); err != nil {
			t.Fatal(err)
		}
		um.IsEdns0().Option = append(um.IsEdns0().Option, r.s.keepalive)
		if u, err := um.Pack(); err == nil {
			want = append(want, u)
		} else {
			t.Fatal(err)
		}
		burst = binary.BigEndian.AppendUint16(burst, uint16(len(raw)))
		burst = append(burst, raw...)
	}
	// A TLS record per write, of 1 to 40 bytes: reads that hold a part
	// of a query, and sessions holding several records when the server
	// takes what they have buffered.
	for b := burst; len(b) > 0; {
		n := min(len(b), 1+len(b)%40)
		if _, err := c.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i, w := range want {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		got := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		var gm, wm dns.Msg
		gm.Unpack(got)
		wm.Unpack(w)
		if gm.String() != wm.String() {
			t.Errorf("reply %d over TLS:\n%v\nwant:\n%v", i, &gm, &wm)
		}
	}

	if n := r.tapped[OverTLS].Load(); n != int64(len(want)) || r.tapped[OverTCP].Load() != 0 {
		t.Errorf("tapped %d queries as over TLS and %d as over TCP, want %d and 0", n, r.tapped[OverTCP].Load(), len(want))
	}

	// Not TLS: a DNS query where the handshake should be.
	plain := r.dialTo(t, serverAddr, r.tlsAddr)
	if _, err := plain.Write(tcpQuery(t, 1)); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(plain, 5*time.Second) {
		t.Error("a connection that sent no TLS stayed open")
	}
	waitFor(t, "the failed handshake counted", 5*time.Second, func() bool { return r.events.handshakes.Load() == 1 })

	// One prefix, two connections at most, over TLS and TCP alike: a
	// third, plain, closes the TLS one answered the least recently.
	second := r.dialTLS(t, pool)
	if _, err := second.Write(tcpQuery(t, 2)); err != nil {
		t.Fatal(err)
	}
	if got, err := readReply(second, 2*time.Second); err != nil || got != 2 {
		t.Fatalf("reply %d, %v; want reply 2", got, err)
	}
	waitFor(t, "the answered connections to be idle", 5*time.Second, r.allIdle)
	ask(t, r.dial(t, serverAddr), 3)
	if !closedByServer(c, 5*time.Second) {
		t.Error("the least recently answered TLS connection stayed open past the prefix's limit")
	}
	if _, err := second.Write(tcpQuery(t, 4)); err != nil {
		t.Fatal(err)
	}
	if got, err := readReply(second, 2*time.Second); err != nil || got != 4 {
		t.Fatalf("reply %d, %v; want reply 4 on the other TLS connection", got, err)
	}
}
