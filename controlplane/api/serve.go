package api

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/steadydns/steadydns/controlplane/config"
)

// Serve guards h as cfg's server section says (the tokens, the names,
// TLS), listens on server.api and serves h there until the server it
// returns is shut down. It also returns the address it listens on.
func Serve(h http.Handler, cfg *config.Config) (*http.Server, net.Addr, error) {
	s := cfg.Server
	write, read, err := tokens(cfg)
	if err != nil {
		return nil, nil, err
	}
	a := Access{WriteToken: write, ReadToken: read, Hosts: s.APIHosts}
	if host, _, err := net.SplitHostPort(s.API); err == nil && !isIP(host) {
		a.Hosts = append(a.Hosts, host)
	}
	srv := NewServer(Guard(h, a))
	if t := s.APITLS; t != nil {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, nil, cfg.Errorf("server.api_tls", "loading the certificate and key: %v", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.API)
	if err != nil {
		return nil, nil, fmt.Errorf("listening for the api on %s: %w", s.API, err)
	}
	if srv.TLSConfig != nil {
		go srv.ServeTLS(ln, "", "")
	} else {
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			slog.Warn("the api listens beyond loopback without server.api_tls: its tokens cross the network in clear", "api", ln.Addr().String())
		}
		go srv.Serve(ln)
	}
	return srv, ln.Addr(), nil
}
