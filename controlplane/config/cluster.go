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
	URLs  []string        // nats:// or tls:// servers every role connects to
	Embed *Embed          // an aggregator also runs a NATS server; nil: external servers only
	Hosts map[string]Host // every host of the fleet, by id: its roles and its own NKey
	TLS   *TLS            // nil: plain TCP
}

// Host is one host of a fleet. Its key is its identity: the servers let it
// publish only under its own id and cell, and receivers count only hosts
// listed here.
type Host struct {
	Roles  []Role
	Key    string // NKey user public key; `steadydns keygen` makes the pair
	Cell   string // the prober's or aggregator's cell; default the first of cluster.cells
	Region string // the prober's region; "" leaves it to --region
}

// Has reports whether the host may play role r.
func (h Host) Has(r Role) bool { return slices.Contains(h.Roles, r) }

// HostsWith lists, sorted, the ids of the hosts that may play role r.
func (n *NATS) HostsWith(r Role) []string {
	var out []string
	for id, h := range n.Hosts {
		if h.Has(r) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// HostByKey is the id of the host whose public key is key.
func (n *NATS) HostByKey(key string) (string, bool) {
	for id, h := range n.Hosts {
		if h.Key == key {
			return id, true
		}
	}
	return "", false
}

// Embed is the NATS server an aggregator runs inside its process. The
// aggregators' servers form one NATS cluster through their routes, so a
// small fleet needs no other service and has no single point of failure.
type Embed struct {
	Listen        string   // client address, host:port; default 0.0.0.0:4222
	ClusterListen string   // route address, host:port; default 0.0.0.0:6222
	Routes        []string // nats-route:// URLs of every aggregator's route address; a server skips its own
	StoreDir      string   // JetStream storage, for the config bucket; default /var/lib/steadydns/nats
	// Insecure allows listening beyond loopback without TLS: keys and
	// route signatures then cross the network in clear.
	Insecure bool
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

// HostRoles lists every role a host of cluster.nats.hosts may hold.
var HostRoles = []Role{RoleProber, RoleAggregator, RoleEdge, RoleAdmin}

var (
	clusterKeys = []string{"config", "nats", "cells", "capacity", "edges"}
	natsKeys    = []string{"urls", "embed", "hosts", "users", "tls"}
	embedKeys   = []string{"listen", "cluster_listen", "routes", "store_dir", "insecure"}
	hostKeys    = []string{"roles", "key", "cell", "region"}
	tlsKeys     = []string{"ca", "cert", "key"}
)

// MaxHostID is the longest host id, in bytes: a chunk header and a result
// frame hold this much.
const MaxHostID = 32

// maxRegion is the longest region a result frame holds, in bytes.
const maxRegion = 32

// ValidHostID reports why id cannot name a host: it must be 1 to
// MaxHostID bytes and one NATS subject token.
func ValidHostID(id string) error {
	if id == "" || len(id) > MaxHostID {
		return fmt.Errorf("host id %q: want 1 to %d bytes", id, MaxHostID)
	}
	if strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("host id %q: '.', '*', '>' and white space are not allowed", id)
	}
	return nil
}

// usersMoved is the error for the old per-role key lists, which let any
// key of a role speak for every host of it.
const usersMoved = `replaced by cluster.nats.hosts, one entry per host with a key of its own:
    hosts:
      p1a: { roles: [prober], key: U..., cell: eu, region: eu-west }
      a1:  { roles: [aggregator], key: U... }
      ops: { roles: [admin], key: U... }
  steadydns keygen --id NAME writes a host's seed and prints its line`

func (d *decoder) cluster(f fields) Cluster {
	c := Cluster{Config: ConfigFile}
	f.str("config", &c.Config)
	c.Cells, c.Capacity = d.cells(f), d.capacity(f)
	f.int("edges", &c.Edges)
	if !f.has("nats") {
		return c
	}
	nf := f.mapping("nats", natsKeys)
	n := &NATS{Hosts: map[string]Host{}}
	nf.strs("urls", &n.URLs)
	if nf.has("embed") {
		ef := nf.mapping("embed", embedKeys)
		n.Embed = &Embed{Listen: "0.0.0.0:4222", ClusterListen: "0.0.0.0:6222", StoreDir: "/var/lib/steadydns/nats"}
		ef.str("listen", &n.Embed.Listen)
		ef.str("cluster_listen", &n.Embed.ClusterListen)
		ef.strs("routes", &n.Embed.Routes)
		ef.str("store_dir", &n.Embed.StoreDir)
		ef.bool("insecure", &n.Embed.Insecure)
	}
	if nf.has("users") {
		d.errorf(nf.vals["users"].keyNode, nf.key("users"), "%s", usersMoved)
	}
	d.each(nf.get("hosts"), nf.key("hosts"), false, func(e entry) {
		hf := d.mapping(e.val, e.path, hostKeys)
		var h Host
		var roles []string
		hf.strs("roles", &roles)
		for _, r := range roles {
			h.Roles = append(h.Roles, Role(r))
		}
		hf.str("key", &h.Key)
		hf.str("cell", &h.Cell)
		hf.str("region", &h.Region)
		n.Hosts[e.key] = h
	})
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
	if len(n.Hosts) == 0 {
		v.errorf("cluster.nats.hosts", "required: every host of the fleet with its roles and its own NKey; steadydns keygen --id NAME prints a host's line")
	}
	ids := make([]string, 0, len(n.Hosts))
	for id := range n.Hosts {
		ids = append(ids, id)
	}
	// In file order, so the second mention of a key is the one reported.
	slices.SortStableFunc(ids, func(a, b string) int {
		return v.c.Line("cluster.nats.hosts."+a) - v.c.Line("cluster.nats.hosts."+b)
	})
	seen := map[string]string{}
	for _, id := range ids {
		h := n.Hosts[id]
		key := "cluster.nats.hosts." + id
		if err := ValidHostID(id); err != nil {
			v.errorf(key, "%v", err)
		}
		if len(h.Roles) == 0 {
			v.errorf(key+".roles", "required: one or more of prober, aggregator, edge, admin")
		}
		for i, r := range h.Roles {
			if !slices.Contains(HostRoles, r) {
				v.errorf(fmt.Sprintf("%s.roles[%d]", key, i), "unknown role %q, want prober, aggregator, edge or admin", r)
			} else if slices.Index(h.Roles, r) != i {
				v.errorf(fmt.Sprintf("%s.roles[%d]", key, i), "role %s is listed twice", r)
			}
		}
		switch {
		case h.Key == "":
			v.errorf(key+".key", "required: the host's NKey public key (steadydns keygen --id %s)", id)
		case !nkeys.IsValidPublicUserKey(h.Key):
			v.errorf(key+".key", "%q is not an NKey user public key (they start with U)", h.Key)
		default:
			// One key, one host: the servers grant permissions by key.
			if other, dup := seen[h.Key]; dup {
				v.errorf(key+".key", "key is already %s's", other)
			}
			seen[h.Key] = id
		}
		if h.Cell != "" {
			if _, ok := v.c.Cell(h.Cell); !ok {
				v.errorf(key+".cell", "%q is not in cluster.cells (%v)", h.Cell, v.c.CellNames())
			}
		}
		if len(h.Region) > maxRegion {
			v.errorf(key+".region", "%q is longer than %d bytes", h.Region, maxRegion)
		}
	}
	if len(n.Hosts) > 0 && len(n.HostsWith(RoleAggregator)) == 0 {
		v.errorf("cluster.nats.hosts", "at least one host needs the aggregator role")
	}
	if e := n.Embed; e != nil && n.TLS == nil && !e.Insecure {
		// Off loopback without TLS, anyone on the path reads the keys'
		// signatures and the config bucket, and can splice into routes.
		for _, l := range []struct{ key, addr string }{{"listen", e.Listen}, {"cluster_listen", e.ClusterListen}} {
			if !loopbackAddr(l.addr) {
				v.errorf("cluster.nats.embed."+l.key, "%s is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP", l.addr)
			}
		}
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

// loopbackAddr reports whether host:port addr listens on loopback only.
func loopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
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
