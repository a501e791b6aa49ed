package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// hostsFleet writes a fleet config with cells a and b and these hosts,
// each with a fresh key, and returns the config and each host's seed file.
func hostsFleet(t *testing.T) (*config.Config, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	seeds := map[string]string{}
	var lines strings.Builder
	for _, h := range []string{
		"p1: { roles: [prober], cell: b, region: r1",
		"p2: { roles: [prober]",
		"a1: { roles: [aggregator, edge]",
		"a2: { roles: [aggregator], cell: b",
		"e1: { roles: [edge]",
		"ops: { roles: [admin]",
	} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		id := strings.SplitN(h, ":", 2)[0]
		seeds[id] = filepath.Join(dir, id+".nk")
		if err := os.WriteFile(seeds[id], seed, 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&lines, "      %s, key: %s }\n", h, pub)
	}
	// A seed no host is listed with.
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	seeds["stranger"] = filepath.Join(dir, "stranger.nk")
	if err := os.WriteFile(seeds["stranger"], seed, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	cfg := `server:
  listen: ["198.18.0.2:53"]
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80 }
aggregation:
  table_size: 16
cluster:
  cells: [{ name: a, probers: 1, aggregators: 1 }, { name: b, probers: 1, aggregators: 1 }]
  nats:
    urls: ["nats://198.18.66.1:4222"]
    hosts:
` + lines.String()
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c, seeds
}

// TestFleetIdentity: a host's id comes from its seed's key, its roles,
// cell and region from its line; a flag that claims more is refused.
func TestFleetIdentity(t *testing.T) {
	cfg, seeds := hostsFleet(t)
	for _, tc := range []struct {
		name string
		in   Identity
		want Identity
		err  string
	}{
		{"from the key alone", Identity{NKeySeed: seeds["p1"]},
			Identity{ID: "p1", Roles: []config.Role{config.RoleProber}, Cell: "b", Region: "r1", NKeySeed: seeds["p1"]}, ""},
		{"the first cell by default", Identity{NKeySeed: seeds["p2"], Region: "r9"},
			Identity{ID: "p2", Roles: []config.Role{config.RoleProber}, Region: "r9", NKeySeed: seeds["p2"]}, ""},
		{"fewer roles than the line", Identity{NKeySeed: seeds["a1"], Roles: []config.Role{config.RoleEdge}},
			Identity{ID: "a1", Roles: []config.Role{config.RoleEdge}, NKeySeed: seeds["a1"]}, ""},
		{"no seed", Identity{ID: "p1"}, Identity{}, "a fleet host needs --nkey-seed"},
		{"another host's key", Identity{ID: "p2", NKeySeed: seeds["p1"]}, Identity{}, "cluster.nats.hosts.p2.key: the seed in"},
		{"a key no host has", Identity{NKeySeed: seeds["stranger"]}, Identity{}, "is no host's"},
		{"an id not listed", Identity{ID: "p9", NKeySeed: seeds["p1"]}, Identity{}, "host p9 is not listed"},
		{"a role not granted", Identity{NKeySeed: seeds["e1"], Roles: []config.Role{config.RoleAggregator}}, Identity{},
			"cluster.nats.hosts.e1.roles: --role aggregator: host e1 may play only edge"},
		{"another cell", Identity{NKeySeed: seeds["p1"], Cell: "a"}, Identity{}, "--cell a: host p1 belongs to cell b"},
		{"a cell the line leaves to the first", Identity{NKeySeed: seeds["p2"], Cell: "b"}, Identity{}, "belongs to the first cell, a"},
		{"another region", Identity{NKeySeed: seeds["p1"], Region: "r2"}, Identity{}, "--region r2: host p1 is in region r1"},
		{"an admin is no server", Identity{NKeySeed: seeds["ops"]}, Identity{}, "host ops plays no server role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fleetIdentity(cfg, tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.want.ID || !slices.Equal(got.Roles, tc.want.Roles) || got.Cell != tc.want.Cell ||
				got.Region != tc.want.Region || got.NKeySeed != tc.want.NKeySeed {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSenderAllowed: frames come only from a cell's probers, tables only
// from its aggregators, state only from aggregators and admins, and
// nothing from a host the config does not list.
func TestSenderAllowed(t *testing.T) {
	cfg, _ := hostsFleet(t)
	for _, tc := range []struct {
		kind         transport.Kind
		cell, sender string
		want         bool
	}{
		{transport.KindFrame, "b", "p1", true},
		{transport.KindFrame, "a", "p1", false}, // p1 is in cell b
		{transport.KindFrame, "a", "p2", true},  // the first cell by default
		{transport.KindFrame, "a", "a1", false}, // an aggregator is no prober
		{transport.KindFrame, "a", "x9", false}, // not listed
		{transport.KindTable, "a", "a1", true},
		{transport.KindTable, "b", "a2", true},
		{transport.KindTable, "a", "a2", false},
		{transport.KindTable, "a", "e1", false}, // an edge's key run as an aggregator
		{transport.KindState, "", "a2", true},
		{transport.KindState, "", "ops", true},
		{transport.KindState, "", "e1", false}, // an edge drains nothing
		{transport.KindState, "", "p1", false},
	} {
		if got := senderAllowed(cfg, tc.kind, tc.cell, tc.sender); got != tc.want {
			t.Errorf("%v from %s in cell %q: %v, want %v", tc.kind, tc.sender, tc.cell, got, tc.want)
		}
	}
	if got, want := messageLength(cfg, transport.KindState), transport.StateSize; got != want {
		t.Errorf("state length %d, want %d", got, want)
	}
}

// TestEdgeRefusesState: an edge's API refuses admin and external changes
// with api.ErrWrongHost (403), naming the aggregators.
func TestEdgeRefusesState(t *testing.T) {
	cfg, _ := hostsFleet(t)
	d := &Daemon{id: Identity{ID: "e1", Roles: []config.Role{config.RoleEdge}}, fleet: &fleetNode{}}
	d.plan.Store(&Plan{Config: cfg})
	for _, err := range []error{d.SetAdmin("web1", "down"), d.SetExternal("web1", false)} {
		if !errors.Is(err, api.ErrWrongHost) || !strings.Contains(err.Error(), "a1, a2") {
			t.Errorf("got %v, want ErrWrongHost naming a1, a2", err)
		}
	}
}
