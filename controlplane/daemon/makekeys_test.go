package daemon_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
)

// TestMakeKeysWithoutZones: a host that serves no zone, such as an
// aggregator of a fleet, has no keys to make and starts; asking for a
// zone the config lacks is an error that names it.
func TestMakeKeysWithoutZones(t *testing.T) {
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "steadydns.yaml"), []byte("server:\n  listen: [\"198.18.0.2:53\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := daemon.MakeKeys(cfg, ""); err != nil || len(keys) != 0 {
		t.Errorf("MakeKeys without zones: %v, %v; want no keys and no error", keys, err)
	}
	if _, err := daemon.MakeKeys(cfg, "example.test."); err == nil || !strings.Contains(err.Error(), "no zone example.test. in the config") {
		t.Errorf("MakeKeys for a zone the config lacks: %v", err)
	}
}
