package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbedOptions configure a NATS server run inside the process.
type EmbedOptions struct {
	Listen        string   // clients' host:port; port 0 picks a free one
	ClusterListen string   // routes' host:port; empty runs a lone server
	Routes        []string // other servers' route addresses, host:port or nats-route:// URLs
	ClusterName   string   // the same on every server of the cluster; default "steadydns"
	ServerName    string   // this aggregator's host id, unique in the cluster
	Hosts         []Host   // every host of the fleet: the only clients let in
	// SeedFile is this aggregator's NKey seed: it signs the routes this
	// server opens, and the other servers let in only routes signed by an
	// aggregator of Hosts.
	SeedFile string
	TLS      TLS    // Cert and Key serve clients and routes; CA verifies routes
	StoreDir string // JetStream's files: the config bucket
}

// readyWait bounds how long Embed waits for the server to listen.
const readyWait = 10 * time.Second

// Server is an embedded NATS server.
type Server struct {
	s   *server.Server
	log *serverLog

	mu   sync.Mutex      // serialises SetHosts
	opts *server.Options // as started, with the hosts now let in
}

// Embed starts a NATS server with JetStream and per-role NKey users
// (Permissions) and returns once it accepts clients. Servers whose Routes
// reach each other form one cluster.
func Embed(opts EmbedOptions) (*Server, error) {
	log := &serverLog{}
	so, err := serverOptions(opts, log)
	if err != nil {
		return nil, fmt.Errorf("embedding nats server: %w", err)
	}
	s, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("embedding nats server: %w", err)
	}
	s.SetLoggerV2(log, false, false, false)
	s.Start()
	if !s.ReadyForConnections(readyWait) {
		s.Shutdown()
		if msg := log.fatal.Load(); msg != nil {
			return nil, fmt.Errorf("embedding nats server: %s", *msg)
		}
		return nil, fmt.Errorf("embedding nats server: not listening after %v", readyWait)
	}
	return &Server{s: s, log: log, opts: so.Clone()}, nil
}

// SetHosts lets in hosts from now on, each with its permissions, and
// routes signed by their aggregators: a host removed is disconnected and
// its key refused, without restarting the server. This server's own
// entry must stay an aggregator's.
func (s *Server) SetHosts(hosts []Host) error {
	if err := checkHosts(hosts); err != nil {
		return fmt.Errorf("updating the nats server's hosts: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	so := s.opts.Clone()
	so.Nkeys = nkeyUsers(hosts)
	if a, ok := so.CustomRouterAuthentication.(*routeAuth); ok {
		if err := a.setKeys(hosts, so.ServerName); err != nil {
			return fmt.Errorf("updating the nats server's hosts: %w", err)
		}
	}
	if err := s.s.ReloadOptions(so); err != nil {
		return fmt.Errorf("updating the nats server's hosts: %w", err)
	}
	s.opts = so
	return nil
}

// nkeyUsers are hosts as the server's users, each with its permissions.
func nkeyUsers(hosts []Host) []*server.NkeyUser {
	var out []*server.NkeyUser
	for _, h := range hosts {
		pub, sub := Permissions(h)
		out = append(out, &server.NkeyUser{Nkey: h.Key, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: pub},
			Subscribe: &server.SubjectPermission{Allow: sub},
		}})
	}
	return out
}

func serverOptions(opts EmbedOptions, log *serverLog) (*server.Options, error) {
	if opts.ServerName == "" {
		return nil, errors.New("no server name")
	}
	if opts.StoreDir == "" {
		return nil, errors.New("no jetstream store directory")
	}
	if err := checkHosts(opts.Hosts); err != nil {
		return nil, err
	}
	host, port, err := hostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address: %w", err)
	}
	so := &server.Options{
		ServerName: opts.ServerName,
		Host:       host,
		Port:       port,
		NoSigs:     true, // the process owns its signals
		JetStream:  true,
		StoreDir:   opts.StoreDir,
	}
	so.Nkeys = nkeyUsers(opts.Hosts)
	var cert []tls.Certificate
	var pool *x509.CertPool
	if opts.TLS.enabled() {
		if opts.TLS.Cert == "" || opts.TLS.Key == "" {
			return nil, errors.New("tls: an embedded server needs cert and key")
		}
		c, err := tls.LoadX509KeyPair(opts.TLS.Cert, opts.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("loading tls certificate: %w", err)
		}
		cert = []tls.Certificate{c}
		if opts.TLS.CA != "" {
			if pool, err = loadCA(opts.TLS.CA); err != nil {
				return nil, err
			}
		}
		// Clients prove who they are with their NKey; a certificate they
		// present anyway is checked against CA.
		so.TLS = true
		so.TLSTimeout = 2
		so.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: cert, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	}
	if opts.ClusterListen == "" {
		if len(opts.Routes) > 0 {
			return nil, errors.New("routes without a cluster listen address")
		}
		return so, nil
	}
	ch, cp, err := hostPort(opts.ClusterListen)
	if err != nil {
		return nil, fmt.Errorf("cluster listen address: %w", err)
	}
	so.Cluster = server.ClusterOpts{Name: opts.ClusterName, Host: ch, Port: cp}
	if so.Cluster.Name == "" {
		so.Cluster.Name = "steadydns"
	}
	signer, err := newRouteAuth(opts, log)
	if err != nil {
		return nil, err
	}
	so.CustomRouterAuthentication = signer
	if cert != nil {
		if pool == nil {
			return nil, errors.New("tls: routes need a ca to verify the other servers")
		}
		// Only a server with a certificate from CA joins the cluster.
		so.Cluster.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: cert, RootCAs: pool,
			ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
		so.Cluster.TLSTimeout = 2
	}
	for _, r := range opts.Routes {
		if !strings.Contains(r, "://") {
			r = "nats-route://" + r
		}
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r, err)
		}
		u.User = signer.credentials()
		so.Routes = append(so.Routes, u)
	}
	return so, nil
}

func hostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q", p)
	}
	if port == 0 {
		// nats-server reads 0 as its default port.
		port = server.RANDOM_PORT
	}
	return h, port, nil
}

func loadCA(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("reading tls ca %s: no certificate", file)
	}
	return pool, nil
}

// ClientURL is the URL clients connect to, with the port actually bound.
func (s *Server) ClientURL() string { return s.s.ClientURL() }

// ClusterAddr is the address other servers route to, with the port
// actually bound; empty for a lone server.
func (s *Server) ClusterAddr() string {
	if a := s.s.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Routes is the number of other servers this one has a route to.
func (s *Server) Routes() int { return s.s.NumRoutes() }

// Shutdown stops the server and waits until it has.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

// serverLog sends the server's log to slog. Notices, which include a
// banner of a dozen lines at every start, go to debug. It counts what the
// server refused, which it reports only in its log.
type serverLog struct {
	fatal atomic.Pointer[string]

	publish, subscribe, clients, routes atomic.Uint64
}

// Refused counts what an embedded server refused: each is a host trying
// what its key does not allow, or something without a key of the fleet.
type Refused struct {
	Publish   uint64 // publishes on a subject the sender's key does not allow
	Subscribe uint64 // subscriptions the subscriber's key does not allow
	Clients   uint64 // client connections without a key of the fleet
	Routes    uint64 // routes without an aggregator's signature
}

// Refused returns what the server has refused so far.
func (s *Server) Refused() Refused {
	l := s.log
	return Refused{Publish: l.publish.Load(), Subscribe: l.subscribe.Load(), Clients: l.clients.Load(), Routes: l.routes.Load()}
}

func (l *serverLog) Noticef(format string, v ...any) {
	slog.Debug(fmt.Sprintf(format, v...), "component", "nats-server")
}
func (l *serverLog) Warnf(format string, v ...any) {
	slog.Warn(fmt.Sprintf(format, v...), "component", "nats-server")
}
func (l *serverLog) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	switch {
	case strings.Contains(msg, "Publish Violation"):
		l.publish.Add(1)
	case strings.Contains(msg, "Subscription Violation"):
		l.subscribe.Add(1)
	case strings.Contains(msg, "authentication error") && strings.Contains(msg, " - cid:"):
		// A route's failure is counted where it is checked (routeAuth).
		l.clients.Add(1)
	}
	slog.Error(msg, "component", "nats-server")
}
func (l *serverLog) Debugf(format string, v ...any) {
	slog.Debug(fmt.Sprintf(format, v...), "component", "nats-server")
}

// Tracef is never called: the server runs with tracing off.
func (l *serverLog) Tracef(format string, v ...any) {}

// Fatalf is what the server says when it cannot run, such as a port in
// use. The server does not exit the process: Embed returns the message.
func (l *serverLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.fatal.Store(&msg)
}

// Clients is what every client connection of this server has carried so
// far, from the client's side: In is what the server delivered to it, Out
// what it published. Payload bytes only, as the server counts them.
func (s *Server) Clients() ([]Traffic, error) {
	var out []Traffic
	for offset := 0; ; {
		z, err := s.s.Connz(&server.ConnzOptions{Offset: offset, Limit: connzPage})
		if err != nil {
			return nil, fmt.Errorf("listing nats connections: %w", err)
		}
		for _, c := range z.Conns {
			// The server's "in" is what the client sent it.
			out = append(out, Traffic{Name: c.Name, InMsgs: uint64(c.OutMsgs), InBytes: uint64(c.OutBytes),
				OutMsgs: uint64(c.InMsgs), OutBytes: uint64(c.InBytes)})
		}
		offset += len(z.Conns)
		if len(z.Conns) < connzPage || offset >= z.Total {
			return out, nil
		}
	}
}

// ClientsWithKeys counts the clients connected to this server, not the
// routes, that authenticated with one of keys: an aggregator counts the
// edges it serves with the edges' public keys.
func (s *Server) ClientsWithKeys(keys []string) (int, error) {
	n := 0
	for offset := 0; ; {
		cz, err := s.s.Connz(&server.ConnzOptions{Username: true, Offset: offset, Limit: connzPage})
		if err != nil {
			return 0, fmt.Errorf("listing nats connections: %w", err)
		}
		for _, c := range cz.Conns {
			if slices.Contains(keys, c.AuthorizedUser) {
				n++
			}
		}
		offset += len(cz.Conns)
		if len(cz.Conns) < connzPage || offset >= cz.Total {
			return n, nil
		}
	}
}

// connzPage is how many connections one Connz call lists.
const connzPage = 1024
