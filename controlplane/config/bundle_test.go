package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fleetSections = `zones:
  - origin: example.test.
    file: zones/example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80 }
records:
  - name: www.example.test.
    type: A
    answers:
      - { value: 198.18.1.1, check: web1 }
aggregation:
  push_interval: 500ms
`

// pushDir writes a pusher's config: its own server section and the fleet
// sections, with the zone file in a subdirectory.
func pushDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "zones"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zones", "example.test.zone"), []byte("@ SOA ns hostmaster 1 2 3 4 5\nwww A 198.18.1.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(p, []byte("server:\n  listen: [\"198.18.0.99:53\"]\n"+fleetSections), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBundleRoundTrip(t *testing.T) {
	b, pushed, err := NewBundle(pushDir(t))
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalBundle(data)
	if err != nil {
		t.Fatal(err)
	}

	// A host's own file: its server and cluster sections only.
	hostDir := t.TempDir()
	local := filepath.Join(hostDir, "host.yaml")
	if err := os.WriteFile(local, []byte("server:\n  listen: [\"198.18.64.31:53\"]\ncluster:\n  config: nats\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n    hosts: {a1: {roles: [aggregator], key: "+testKey+"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFleet(local, got, filepath.Join(hostDir, "rev-3"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash != pushed.Hash {
		t.Errorf("host hash %x, pusher's %x: hosts of a fleet must agree", c.Hash, pushed.Hash)
	}
	if len(c.Server.Listen) != 1 || c.Server.Listen[0].String() != "198.18.64.31:53" {
		t.Errorf("server section: %v, want the host's own", c.Server.Listen)
	}
	if want := filepath.Join(hostDir, "rev-3", "zones", "example.test.zone"); len(c.Zones) != 1 || c.Zones[0].File != want {
		t.Errorf("zones: %+v, want the file at %s", c.Zones, want)
	}
	if c.Cluster.Config != ConfigNATS {
		t.Errorf("cluster section: %+v", c.Cluster)
	}

	// Errors name the file each key came from.
	bad := *got
	bad.Config = []byte(strings.Replace(string(got.Config), "push_interval: 500ms", "push_interval: 5ms", 1))
	_, err = LoadFleet(local, &bad, filepath.Join(hostDir, "rev-4"))
	want := filepath.Join(hostDir, "rev-4", "config.yaml") + ":14: aggregation.push_interval: 5ms is below the minimum of 50ms"
	if err == nil || err.Error() != want {
		t.Errorf("bad revision: got %v\nwant %s", err, want)
	}
	if err := os.WriteFile(local, []byte("server:\n  listen: [\"198.18.64.31:53\"]\n  api: nope\ncluster:\n  config: nats\n  nats:\n    urls: [\"nats://198.18.64.21:4222\"]\n    hosts: {a1: {roles: [aggregator], key: "+testKey+"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFleet(local, got, filepath.Join(hostDir, "rev-5"))
	if want := local + `:3: server.api: invalid address "nope", want host:port such as 127.0.0.1:9153`; err == nil || err.Error() != want {
		t.Errorf("bad local file: got %v\nwant %s", err, want)
	}

	// A host's file that also carries fleet sections would be ambiguous.
	if err := os.WriteFile(local, []byte("server:\n  listen: [\"198.18.64.31:53\"]\nrecords: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFleet(local, got, filepath.Join(hostDir, "rev-6"))
	if want := local + ":3: records: with cluster.config: nats this section comes from the config bucket (steadydns config push): remove it here"; err == nil || err.Error() != want {
		t.Errorf("fleet section in the local file: got %v\nwant %s", err, want)
	}
}

func TestBundleRefuses(t *testing.T) {
	// A zone file outside the config's directory would mean another file
	// on every host.
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "example.test.zone")
	if err := os.WriteFile(outside, []byte("@ SOA ns hostmaster 1 2 3 4 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(p, []byte("server:\n  listen: [\"198.18.0.99:53\"]\nzones:\n  - origin: example.test.\n    file: "+outside+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := NewBundle(p)
	if want := p + ":5: zones[0].file: " + outside + " is outside " + dir + ": a pushed config takes only zone files under its own directory"; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	for _, data := range []string{`{}`, `{"config":"eA==","files":{"../x":""}}`, `{"config":"eA==","files":{"/etc/x":""}}`, `not json`} {
		if _, err := UnmarshalBundle([]byte(data)); err == nil {
			t.Errorf("UnmarshalBundle(%s) accepted", data)
		}
	}
}
