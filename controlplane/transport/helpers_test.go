package transport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// identity is one host's NKey: the public key the servers list and the
// seed file the host connects with.
type identity struct {
	Public string
	Seed   string // file
}

func newIdentity(t testing.TB) identity {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "seed.nk")
	if err := os.WriteFile(f, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return identity{Public: pub, Seed: f}
}

// fleet is a test fleet: a key per host, and the hosts as the servers
// list them. Probers and aggregators are in cell c1 unless cells says
// otherwise.
type fleet struct {
	prober, aggregator, edge, admin identity // p1, a1, e1, admin
	ids                             map[string]identity
	hosts                           []Host
}

// testHosts are the test fleet's hosts: s0 to s2 are the aggregators
// that run the servers of a cluster.
var testHosts = []struct {
	id   string
	role Role
}{
	{"p1", RoleProber}, {"p2", RoleProber}, {"a1", RoleAggregator}, {"a2", RoleAggregator},
	{"e1", RoleEdge}, {"e2", RoleEdge}, {"admin", RoleAdmin},
	{"s0", RoleAggregator}, {"s1", RoleAggregator}, {"s2", RoleAggregator},
}

func newFleet(t testing.TB, cells ...string) fleet {
	f := fleet{ids: map[string]identity{}}
	cell := map[string]string{}
	for i := 0; i+1 < len(cells); i += 2 {
		cell[cells[i]] = cells[i+1]
	}
	for _, h := range testHosts {
		who := newIdentity(t)
		f.ids[h.id] = who
		c := cell[h.id]
		if c == "" {
			c = "c1"
		}
		f.hosts = append(f.hosts, Host{ID: h.id, Key: who.Public, Roles: []Role{h.role}, Cell: c})
	}
	f.prober, f.aggregator, f.edge, f.admin = f.ids["p1"], f.ids["a1"], f.ids["e1"], f.ids["admin"]
	return f
}

// embed starts a server for fleet f, as server s1 unless opts names another.
func embed(t testing.TB, f fleet, opts EmbedOptions) *Server {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.ServerName == "" {
		opts.ServerName = "s1"
	}
	opts.Hosts = f.hosts
	if opts.SeedFile == "" {
		opts.SeedFile = f.ids[opts.ServerName].Seed
	}
	opts.StoreDir = t.TempDir()
	s, err := Embed(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// cluster starts n servers that all list every server's route address,
// their own included, as a fleet's shared config does.
func cluster(t testing.TB, f fleet, n int) []*Server {
	t.Helper()
	var routes []string
	for range n {
		routes = append(routes, freeAddr(t))
	}
	var servers []*Server
	for i := range n {
		servers = append(servers, embed(t, f, EmbedOptions{ServerName: fmt.Sprint("s", i), ClusterListen: routes[i],
			Routes: routes}))
	}
	eventually(t, 10*time.Second, func() bool {
		for _, s := range servers {
			if s.Routes() < n-1 {
				return false
			}
		}
		return true
	}, "servers routed to each other")
	return servers
}

// freeAddr returns a loopback address with a port free a moment ago: every
// server of a cluster must know the others' route addresses before it starts.
// The port is below the kernel's ephemeral range: a port from that range,
// free when picked, can be taken as the source port of a connection, such
// as the first server's dial of a route not yet listening, before the
// server it was picked for binds it.
func freeAddr(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &low)
	}
	if low <= 11000 {
		t.Fatalf("the ephemeral ports start at %d: no room below them for a cluster's routes", low)
	}
	for range 100 {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(low-10000)))
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 10000+n.Int64()))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatalf("no free port below %d in 100 tries", low)
	return ""
}

func connect(t testing.TB, url, id string, who identity, opts Options) *Conn {
	t.Helper()
	opts.URLs, opts.ID, opts.NKeySeedFile = []string{url}, id, who.Seed
	if opts.Cell == "" {
		opts.Cell = "c1"
	}
	c, err := Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func flush(t testing.TB, c *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func eventually(t testing.TB, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// certs writes a CA and a certificate it signs for 127.0.0.1, usable by
// servers and clients alike, and returns their files.
func certs(t testing.TB) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "steadydns test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "steadydns test host"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", der), write("key.pem", "EC PRIVATE KEY", keyDER)
}
