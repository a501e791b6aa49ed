package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"
)

// Cluster is the cluster section: how the hosts of a fleet reach each
// other. It is the same on every host of a fleet. Without cluster.nats one
// process plays every role and frames and tables pass in process.
type Cluster struct {
	// Config says where the fleet sections (zones, health_checks, records,
	// aggregation) come from: ConfigFile, this file; ConfigNATS, the
	// latest revision in the NATS key-value bucket that `steadydns config
	// push` fills. server and cluster always come from the local file.
	Config string
	NATS   *NATS // nil: no broker

	// Cells are the groups of probers and aggregators that split the
	// checks among them; at least one. Without cluster.cells there is one,
	// DefaultCell, whose sizes are unknown (0).
	Cells    []Cell
	Capacity Capacity
	// Edges is how many edges the fleet runs, for the capacity check; 0
	// leaves edges unchecked.
	Edges int
}

// Where the fleet sections come from.
const (
	ConfigFile = "file"
	ConfigNATS = "nats"
)

// NATS is how a host reaches the fleet's NATS servers.
type NATS struct {
	URLs  []string          // nats:// or tls:// servers every role connects to
	Embed *Embed            // an aggregator also runs a NATS server; nil: external servers only
	Users map[Role][]string // NKey public keys allowed per role; empty: no authentication
	TLS   *TLS              // nil: plain TCP
}

// Embed is the NATS server an aggregator runs inside its process. The
// aggregators' servers form one NATS cluster through their routes, so a
// small fleet needs no other service and has no single point of failure.
type Embed struct {
	Listen        string   // client address, host:port; default 0.0.0.0:4222
	ClusterListen string   // route address, host:port; default 0.0.0.0:6222
	Routes        []string // nats-route:// URLs of every aggregator's route address; a server skips its own
	StoreDir      string   // JetStream storage, for the config bucket; default /var/lib/steadydns/nats
}

// TLS names the PEM files a host uses for NATS: clients and routes both.
type TLS struct {
	CA, Cert, Key string // absolute; relative paths resolve against the config's directory
}

// Role is one of the jobs a host does in a fleet.
type Role string

// The roles. Admin is not a role a server plays: it is the identity of
// `steadydns config push`, the only one allowed to write the config bucket.
const (
	RoleProber     Role = "prober"
	RoleAggregator Role = "aggregator"
	RoleEdge       Role = "edge"
	RoleAdmin      Role = "admin"
)

// Roles lists the roles a server can play, in the order they start.
var Roles = []Role{RoleProber, RoleAggregator, RoleEdge}

var (
	clusterKeys = []string{"config", "nats", "cells", "capacity", "edges"}
	natsKeys    = []string{"urls", "embed", "users", "tls"}
	embedKeys   = []string{"listen", "cluster_listen", "routes", "store_dir"}
	tlsKeys     = []string{"ca", "cert", "key"}
	userRoles   = []Role{RoleProber, RoleAggregator, RoleEdge, RoleAdmin}
)

func (d *decoder) cluster(f fields) Cluster {
	c := Cluster{Config: ConfigFile}
	f.str("config", &c.Config)
	c.Cells, c.Capacity = d.cells(f), d.capacity(f)
	f.int("edges", &c.Edges)
	if !f.has("nats") {
		return c
	}
	nf := f.mapping("nats", natsKeys)
	n := &NATS{Users: map[Role][]string{}}
	nf.strs("urls", &n.URLs)
	if nf.has("embed") {
		ef := nf.mapping("embed", embedKeys)
		n.Embed = &Embed{Listen: "0.0.0.0:4222", ClusterListen: "0.0.0.0:6222", StoreDir: "/var/lib/steadydns/nats"}
		ef.str("listen", &n.Embed.Listen)
		ef.str("cluster_listen", &n.Embed.ClusterListen)
		ef.strs("routes", &n.Embed.Routes)
		ef.str("store_dir", &n.Embed.StoreDir)
	}
	if nf.has("users") {
		roles := make([]string, len(userRoles))
		for i, r := range userRoles {
			roles[i] = string(r)
		}
		uf := nf.mapping("users", roles)
		for _, r := range userRoles {
			var keys []string
			uf.strs(string(r), &keys)
			if len(keys) > 0 {
				n.Users[r] = keys
			}
		}
	}
	if nf.has("tls") {
		tf := nf.mapping("tls", tlsKeys)
		n.TLS = &TLS{}
		for _, kd := range []struct {
			k   string
			dst *string
		}{{"ca", &n.TLS.CA}, {"cert", &n.TLS.Cert}, {"key", &n.TLS.Key}} {
			k, dst := kd.k, kd.dst
			tf.str(k, dst)
			if *dst != "" && !filepath.IsAbs(*dst) {
				if abs, err := filepath.Abs(filepath.Join(filepath.Dir(d.fileOf("cluster")), *dst)); err == nil {
					*dst = abs
				}
			}
		}
	}
	c.NATS = n
	return c
}

func (v *validator) cluster() {
	c := v.c.Cluster
	oneOf(v, "cluster.config", c.Config, ConfigFile, ConfigNATS)
	v.cells()
	n := c.NATS
	if n == nil {
		if c.Config == ConfigNATS {
			v.errorf("cluster.config", "nats needs cluster.nats to say where the servers are")
		}
		return
	}
	if len(n.URLs) == 0 {
		v.errorf("cluster.nats.urls", "at least one server is required")
	}
	for i, u := range n.URLs {
		v.natsURL(fmt.Sprintf("cluster.nats.urls[%d]", i), u, "nats", "tls")
	}
	if e := n.Embed; e != nil {
		v.hostPort("cluster.nats.embed.listen", e.Listen)
		v.hostPort("cluster.nats.embed.cluster_listen", e.ClusterListen)
		for i, r := range e.Routes {
			v.natsURL(fmt.Sprintf("cluster.nats.embed.routes[%d]", i), r, "nats-route", "nats", "tls")
		}
		if !filepath.IsAbs(e.StoreDir) {
			v.errorf("cluster.nats.embed.store_dir", "must be an absolute path, got %q", e.StoreDir)
		}
	}
	seen := map[string]string{}
	// In file order, so the second mention of a key is the one reported.
	roles := slices.Clone(userRoles)
	slices.SortStableFunc(roles, func(a, b Role) int {
		return v.c.Line("cluster.nats.users."+string(a)) - v.c.Line("cluster.nats.users."+string(b))
	})
	for _, r := range roles {
		for i, k := range n.Users[r] {
			key := fmt.Sprintf("cluster.nats.users.%s[%d]", r, i)
			if !nkeys.IsValidPublicUserKey(k) {
				v.errorf(key, "%q is not an NKey user public key (they start with U)", k)
				continue
			}
			// One key, one role: the server grants permissions by key.
			if other, dup := seen[k]; dup {
				v.errorf(key, "key is already listed at %s", other)
			}
			seen[k] = key
		}
	}
	if n.Embed != nil && len(n.Users) == 0 {
		// An embedded server grants each role its subjects by key; with
		// no keys it could not tell a prober from an aggregator.
		v.errorf("cluster.nats.embed", "an embedded server needs cluster.nats.users: the NKey public keys of each role")
	}
	if len(n.Users) > 0 && len(n.Users[RoleAggregator]) == 0 {
		v.errorf("cluster.nats.users", "with users, the aggregator role needs at least one key")
	}
	if t := n.TLS; t != nil {
		for _, kp := range [][2]string{{"ca", t.CA}, {"cert", t.Cert}, {"key", t.Key}} {
			key, p := "cluster.nats.tls."+kp[0], kp[1]
			if p == "" {
				v.errorf(key, "required")
			} else if err := readable(p); err != nil {
				v.errorf(key, "%v", err)
			}
		}
	}
}

func (v *validator) hostPort(key, s string) {
	if _, port, err := net.SplitHostPort(s); err != nil || !validPort(port) {
		v.errorf(key, "invalid address %q, want host:port such as 0.0.0.0:4222", s)
	}
}

func (v *validator) natsURL(key, s string, schemes ...string) {
	u, err := url.Parse(s)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Port() == "" || u.Hostname() == "" {
		v.errorf(key, "invalid url %q, want %s://host:port", s, strings.Join(schemes, "|"))
	}
}

// ParseRoles reads a --role list such as "prober,edge". The empty string
// means every role.
func ParseRoles(s string) ([]Role, error) {
	if s == "" {
		return slices.Clone(Roles), nil
	}
	var out []Role
	for _, part := range strings.Split(s, ",") {
		r := Role(strings.TrimSpace(part))
		if !slices.Contains(Roles, r) {
			return nil, fmt.Errorf("unknown role %q, want prober, aggregator or edge", part)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}
