package transport

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// routeAuth lets in only routes opened by an aggregator of the fleet. A
// route's CONNECT carries the user and password of the route URL that
// opened it: here the aggregator's id and its key's signature of the
// cluster's name and that id. Each server checks the signature against the
// key the fleet config lists for the id. The signature is the same on
// every route, so it is only as secret as the network it crosses: TLS
// keeps it from being read and replayed, and steadydns check refuses a
// route address beyond loopback without TLS unless the operator opts out.
type routeAuth struct {
	cluster string
	keys    atomic.Pointer[map[string]nkeys.KeyPair] // aggregators' public keys, by id
	user    *url.Userinfo                            // this server's own credentials
	log     *serverLog
}

func newRouteAuth(opts EmbedOptions, log *serverLog) (*routeAuth, error) {
	a := &routeAuth{cluster: opts.ClusterName, log: log}
	if a.cluster == "" {
		a.cluster = "steadydns"
	}
	if err := a.setKeys(opts.Hosts, opts.ServerName); err != nil {
		return nil, err
	}
	if opts.SeedFile == "" {
		return nil, errors.New("routes: no nkey seed to sign them with")
	}
	seed, err := os.ReadFile(opts.SeedFile)
	if err != nil {
		return nil, fmt.Errorf("reading the route signing seed: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		return nil, fmt.Errorf("reading the route signing seed %s: %w", opts.SeedFile, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("reading the route signing seed %s: %w", opts.SeedFile, err)
	}
	if want, _ := (*a.keys.Load())[opts.ServerName].PublicKey(); pub != want {
		return nil, fmt.Errorf("routes: the seed in %s is key %s, but aggregator %s's key is %s", opts.SeedFile, pub, opts.ServerName, want)
	}
	sig, err := kp.Sign(a.message(opts.ServerName))
	if err != nil {
		return nil, fmt.Errorf("signing routes: %w", err)
	}
	a.user = url.UserPassword(opts.ServerName, base64.RawURLEncoding.EncodeToString(sig))
	return a, nil
}

// setKeys takes the aggregators of hosts as the ones whose routes are let
// in; self, this server's id, must be one of them.
func (a *routeAuth) setKeys(hosts []Host, self string) error {
	keys := map[string]nkeys.KeyPair{}
	for _, h := range hosts {
		if !slices.Contains(h.Roles, RoleAggregator) {
			continue
		}
		kp, err := nkeys.FromPublicKey(h.Key)
		if err != nil {
			return fmt.Errorf("aggregator %s's key: %w", h.ID, err)
		}
		keys[h.ID] = kp
	}
	if _, ok := keys[self]; !ok {
		return fmt.Errorf("routes: %s is not an aggregator of the fleet", self)
	}
	a.keys.Store(&keys)
	return nil
}

// message is what aggregator id signs: the cluster's name and its own id,
// so a signature opens routes of this cluster only, as that aggregator.
func (a *routeAuth) message(id string) []byte {
	return []byte("steadydns route\x00" + a.cluster + "\x00" + id)
}

// credentials are what this server's routes present.
func (a *routeAuth) credentials() *url.Userinfo { return a.user }

// Check is nats-server's hook for every route that connects.
func (a *routeAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	kp, ok := (*a.keys.Load())[o.Username]
	if ok {
		sig, err := base64.RawURLEncoding.DecodeString(o.Password)
		ok = err == nil && kp.Verify(a.message(o.Username), sig) == nil
	}
	if !ok {
		a.log.routes.Add(1)
	}
	return ok
}
