package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

// TestFleetExample: every host file of examples/fleet loads with the fleet
// sections as `steadydns config push` stores them, and every host computes
// the same config hash, without which each would drop the others' frames
// and tables.
func TestFleetExample(t *testing.T) {
	// The example holds no keys: docs/fleet.md has each host make its own
	// and append every host's line under cluster.nats, as here.
	hostsBlock := "    hosts:\n"
	for _, h := range []string{"a1: { roles: [aggregator]", "a2: { roles: [aggregator]", "e1: { roles: [edge]", "e2: { roles: [edge]",
		"p1a: { roles: [prober], region: r1", "ops: { roles: [admin]"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		hostsBlock += "      " + h + ", key: " + pub + " }\n"
	}
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", "fleet")
	files, err := filepath.Glob(filepath.Join(src, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".yaml") {
			data = append(data, hostsBlock...)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, pushed, err := NewBundle(filepath.Join(dir, "fleet.yaml"))
	if err != nil {
		t.Fatalf("the fleet sections do not load: %v", err)
	}
	if pushed.Cluster.NATS == nil {
		t.Fatal("fleet.yaml has no cluster.nats: config push would have nowhere to connect")
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if b, err = UnmarshalBundle(data); err != nil {
		t.Fatal(err)
	}

	hosts, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hosts = slices.DeleteFunc(hosts, func(p string) bool { return filepath.Base(p) == "fleet.yaml" })
	want := []string{"a1.yaml", "a2.yaml", "e1.yaml", "e2.yaml", "prober.yaml"}
	var got []string
	for _, h := range hosts {
		got = append(got, filepath.Base(h))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("host files %v, want %v", got, want)
	}

	keyed := t.TempDir()
	var routes []string
	bpffs := map[string]string{}
	stateDirs := map[string]string{}
	for _, h := range hosts {
		data, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		withKeys := filepath.Join(keyed, filepath.Base(h))
		if err := os.WriteFile(withKeys, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadFleet(withKeys, b, t.TempDir())
		if err != nil {
			t.Errorf("%s with the pushed fleet sections: %v", h, err)
			continue
		}
		name := filepath.Base(h)
		if c.Cluster.Config != ConfigNATS {
			t.Errorf("%s: cluster.config %q, want nats", name, c.Cluster.Config)
		}
		if c.Hash != pushed.Hash {
			t.Errorf("%s: config hash %016x, the pushed sections' %016x", name, c.Hash, pushed.Hash)
		}
		if !slices.Equal(c.Cluster.NATS.URLs, pushed.Cluster.NATS.URLs) {
			t.Errorf("%s: urls %v, config push uses %v", name, c.Cluster.NATS.URLs, pushed.Cluster.NATS.URLs)
		}
		if len(c.Zones) != 1 || len(c.Records) == 0 || c.Checks.Len() == 0 {
			t.Errorf("%s: %d zones, %d records, %d checks from the bucket", name, len(c.Zones), len(c.Records), c.Checks.Len())
		}
		e := c.Cluster.NATS.Embed
		switch {
		case strings.HasPrefix(name, "a"):
			if e == nil {
				t.Errorf("%s: an aggregator of the example embeds a NATS server", name)
				continue
			}
			// The aggregators run on one machine: a shared state file
			// would be one aggregator's states overwritten by the other's.
			if other, dup := stateDirs[c.Server.StateDir]; dup {
				t.Errorf("%s: state_dir %s is also %s's", name, c.Server.StateDir, other)
			}
			stateDirs[c.Server.StateDir] = name
			if routes == nil {
				routes = e.Routes
			} else if !slices.Equal(e.Routes, routes) {
				t.Errorf("%s: routes %v, another aggregator lists %v", name, e.Routes, routes)
			}
			if !slices.Contains(e.Routes, "nats-route://"+e.ClusterListen) {
				t.Errorf("%s: routes %v lack its own route address %s", name, e.Routes, e.ClusterListen)
			}
		case strings.HasPrefix(name, "e"):
			if e != nil {
				t.Errorf("%s: an edge embeds a NATS server", name)
			}
			if len(c.Server.Interfaces) != 1 || len(c.Server.Listen) == 0 {
				t.Errorf("%s: interfaces %v, listen %v: an edge needs both", name, c.Server.Interfaces, c.Server.Listen)
			}
			// The edges run on one machine: shared pins would be one edge.
			if other, dup := bpffs[c.Server.BPFFS]; dup {
				t.Errorf("%s: bpffs %s is also %s's", name, c.Server.BPFFS, other)
			}
			bpffs[c.Server.BPFFS] = name
		}
	}
	if len(routes) != 2 {
		t.Errorf("aggregators list routes %v, want both aggregators'", routes)
	}
}
