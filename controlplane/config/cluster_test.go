package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestCluster(t *testing.T) {
	agg, _ := nkeys.CreateUser()
	aggPub, _ := agg.PublicKey()
	edge, _ := nkeys.CreateUser()
	edgePub, _ := edge.PublicKey()
	c, err := load(t, base+`cluster:
  config: nats
  nats:
    urls: ["nats://198.18.64.21:4222", "tls://[fd53:64::22]:4222"]
    embed:
      routes: ["nats-route://198.18.64.21:6222", "nats-route://198.18.64.22:6222"]
    hosts:
      a1: { roles: [aggregator], key: `+aggPub+` }
      e1: { roles: [edge], key: `+edgePub+`, region: r1 }
    tls: { ca: ca.pem, cert: host.pem, key: host.key }
`)
	if err == nil || c != nil {
		// The TLS files do not exist yet: relative paths resolve against
		// the config's directory, and the error says which is missing.
		want := "config.yaml:15: cluster.nats.tls.ca: open " + filepath.Join(mustGetwd(t), "ca.pem") + ": no such file or directory"
		if err == nil || err.Error()[:len(want)] != want {
			t.Fatalf("missing tls files: got %v, want %s…", err, want)
		}
	}
	for _, f := range []string{"ca.pem", "host.pem", "host.key"} {
		if err := os.WriteFile(f, []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err = Load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := mustGetwd(t)
	if c.Cluster.Config != ConfigNATS || c.Cluster.NATS == nil {
		t.Fatalf("cluster: %+v", c.Cluster)
	}
	same(t, "Embed", *c.Cluster.NATS.Embed, Embed{Listen: "0.0.0.0:4222", ClusterListen: "0.0.0.0:6222",
		Routes:   []string{"nats-route://198.18.64.21:6222", "nats-route://198.18.64.22:6222"},
		StoreDir: "/var/lib/steadydns/nats"})
	same(t, "TLS", *c.Cluster.NATS.TLS, TLS{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "host.pem"), Key: filepath.Join(dir, "host.key")})
	same(t, "NATS", *c.Cluster.NATS, NATS{
		URLs:  []string{"nats://198.18.64.21:4222", "tls://[fd53:64::22]:4222"},
		Embed: c.Cluster.NATS.Embed, TLS: c.Cluster.NATS.TLS,
		Hosts: map[string]Host{"a1": {Roles: []Role{RoleAggregator}, Key: aggPub}, "e1": {Roles: []Role{RoleEdge}, Key: edgePub, Region: "r1"}},
	})

	// The cluster section does not change the health hash: hosts that
	// reach the brokers differently still share tables.
	plain, err := Parse(filepath.Join(dir, "plain.yaml"), []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Hash != c.Hash {
		t.Errorf("hash with a cluster section %x, without %x", c.Hash, plain.Hash)
	}
	if plain.Cluster.NATS != nil || plain.Cluster.Config != ConfigFile {
		t.Errorf("default cluster: %+v", plain.Cluster)
	}
}

func TestClusterHosts(t *testing.T) {
	key := func() string {
		k, _ := nkeys.CreateUser()
		pub, _ := k.PublicKey()
		return pub
	}
	a, p := key(), key()
	nats := "cluster:\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"one key, one host", nats + "    hosts:\n      a1: { roles: [aggregator], key: " + a + " }\n      p1: { roles: [prober], key: " + a + " }\n",
			"config.yaml:11: cluster.nats.hosts.p1.key: key is already a1's"},
		{"the old users", nats + "    users:\n      aggregator: [" + a + "]\n",
			"config.yaml:9: cluster.nats.users: " + usersMoved},
		{"no aggregator", nats + "    hosts:\n      p1: { roles: [prober], key: " + p + " }\n",
			"config.yaml:9: cluster.nats.hosts: at least one host needs the aggregator role"},
		{"bad role and cell", nats + "    hosts:\n      a1: { roles: [aggregator, resolver], key: " + a + ", cell: mars }\n",
			"config.yaml:10: cluster.nats.hosts.a1.roles[1]: unknown role \"resolver\", want prober, aggregator, edge or admin\nconfig.yaml:10: cluster.nats.hosts.a1.cell: \"mars\" is not in cluster.cells ([default])"},
		{"no key", nats + "    hosts:\n      a1: { roles: [aggregator] }\n",
			"config.yaml:10: cluster.nats.hosts.a1.key: required: the host's NKey public key (steadydns keygen --id a1)"},
		{"bad id", nats + "    hosts:\n      a.1: { roles: [aggregator], key: " + a + " }\n",
			"config.yaml:10: cluster.nats.hosts.a.1: host id \"a.1\": '.', '*', '>' and white space are not allowed"},
		{"open routes", nats + "    hosts:\n      a1: { roles: [aggregator], key: " + a + " }\n    embed:\n      routes: [\"nats-route://198.18.64.21:6222\"]\n",
			"config.yaml:11: cluster.nats.embed.listen: 0.0.0.0:4222 is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP\n" +
				"config.yaml:11: cluster.nats.embed.cluster_listen: 0.0.0.0:6222 is beyond loopback without TLS: set cluster.nats.tls (ca, cert, key), or write insecure: true under cluster.nats.embed to accept plain TCP"},
		{"loopback routes", nats + "    hosts:\n      a1: { roles: [aggregator], key: " + a + " }\n    embed:\n      listen: 127.0.0.1:4222\n      cluster_listen: \"[::1]:6222\"\n", ""},
		{"insecure routes", nats + "    hosts:\n      a1: { roles: [aggregator], key: " + a + " }\n    embed:\n      insecure: true\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, base+tc.yaml)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}

func TestParseRoles(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Role
		err  string
	}{
		{"", []Role{RoleProber, RoleAggregator, RoleEdge}, ""},
		{"edge", []Role{RoleEdge}, ""},
		{"prober, aggregator,prober", []Role{RoleProber, RoleAggregator}, ""},
		{"admin", nil, `unknown role "admin", want prober, aggregator or edge`},
		{"edge,resolver", nil, `unknown role "resolver", want prober, aggregator or edge`},
	} {
		got, err := ParseRoles(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseRoles(%q): error %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRoles(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
