package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
)

// apiClient reaches a server's API as the server's config says: at its
// address, with its token, over HTTPS when it has server.api_tls.
type apiClient struct {
	base  string // scheme://host:port
	token string // sent as a bearer token; "" sends none
	http  *http.Client
	// hint says what to do when the API asks for a token this client
	// does not send.
	hint string
}

// newAPIClient reads the config at path ("" for none: plain HTTP to addr
// without a token) for the API's address, unless addr gives it, its
// certificate and the token a read needs.
func newAPIClient(path, addr string) (*apiClient, error) {
	c := &apiClient{http: &http.Client{Timeout: 5 * time.Second}}
	if path == "" {
		if addr == "" {
			addr = "127.0.0.1:9153"
		}
		c.base = "http://" + addr
		c.hint = "give --config with the server's config, so that its token is sent"
		return c, nil
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = dialAddr(cfg.Server.API)
	}
	if c.token, err = readToken(cfg.Server); err != nil {
		return nil, err
	}
	c.hint = "this client reads the tokens of " + path + ": see that they are the server's"
	c.base = "http://" + addr
	if t := cfg.Server.APITLS; t != nil {
		conf, err := pinned(t.Cert)
		if err != nil {
			return nil, cfg.Errorf("server.api_tls.cert", "%v", err)
		}
		c.http.Transport = &http.Transport{TLSClientConfig: conf}
		c.base = "https://" + addr
	}
	return c, nil
}

// dialAddr is where to reach an API that listens on addr: the same,
// but loopback for a wildcard address.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			return net.JoinHostPort("127.0.0.1", port)
		}
		return net.JoinHostPort("::1", port)
	}
	return addr
}

// readToken is the token a read sends: the read token when the server
// has one, else none, since the reads are open. Without access to the
// read token's file the write token serves, when this user may read it.
func readToken(s config.Server) (string, error) {
	if s.APIReadTokenFile == "" {
		return "", nil
	}
	token, err := api.ReadToken(s.APIReadTokenFile)
	if err == nil {
		return token, nil
	}
	if write, werr := api.ReadToken(api.TokenPath(s)); werr == nil {
		return write, nil
	}
	return "", fmt.Errorf("server.api_read_token_file: %w", err)
}

// pinned is a TLS config that trusts the first certificate of the PEM
// file at path, and nothing else. The CLI talks to the server of the
// config it was given, which presents that very certificate; pinning it
// holds whatever name or address the client uses (127.0.0.1 for an API
// on 0.0.0.0, which the certificate need not name), and no other
// certificate passes, not even one from the issuer of this one.
func pinned(path string) (*tls.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the api's certificate: %w", err)
	}
	var want *x509.Certificate
	for block, rest := pem.Decode(b); block != nil && want == nil; block, rest = pem.Decode(rest) {
		if block.Type == "CERTIFICATE" {
			if want, err = x509.ParseCertificate(block.Bytes); err != nil {
				return nil, fmt.Errorf("reading the api's certificate: %w", err)
			}
		}
	}
	if want == nil {
		return nil, fmt.Errorf("reading the api's certificate: %s holds no PEM certificate", path)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The usual verification by names and issuers is replaced by the
		// pin below.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, want.Raw) {
				return fmt.Errorf("the api presented a certificate other than the one in %s", path)
			}
			if now := time.Now(); now.Before(want.NotBefore) || now.After(want.NotAfter) {
				return fmt.Errorf("the api's certificate in %s is valid only from %s to %s", path, want.NotBefore.Format(time.RFC3339), want.NotAfter.Format(time.RFC3339))
			}
			return nil
		},
	}, nil
}

// getJSON decodes the JSON the API answers to GET path into v.
func (c *apiClient) getJSON(path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("querying the api: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("querying the api: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg := resp.Status
		var e struct{ Error string }
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)); json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg += ": " + e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg += "; " + c.hint
		}
		return fmt.Errorf("querying the api: %s: %s", path, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}
