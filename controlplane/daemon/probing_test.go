package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/steadydns/steadydns/controlplane/config"
)

// TestBuildRegionProbes: a prober runs the checks that name its region or
// none; a prober without a region runs only those that name none.
func TestBuildRegionProbes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "steadydns.yaml")
	files := map[string]string{
		"example.test.zone": "$ORIGIN example.test.\n@ 3600 SOA ns1.other.test. hostmaster 1 7200 3600 1209600 300\n@ 3600 NS ns1.other.test.\n",
		"steadydns.yaml": `server:
  listen: ["198.18.0.2:53"]
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  anywhere: {type: tcp, target: 198.18.1.1, port: 80}
  west: {type: tcp, target: 198.18.1.2, port: 80, regions: [eu-west, us-west, ap-south]}
  east: {type: tcp, target: 198.18.1.3, port: 80, regions: [eu-east, us-east, ap-south]}
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: anywhere}]
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for region, want := range map[string][]string{
		"":         {"anywhere"},
		"eu-west":  {"anywhere", "west"},
		"us-east":  {"anywhere", "east"},
		"ap-south": {"anywhere", "east", "west"},
		"sa-east":  {"anywhere"},
	} {
		pr := &probing{cell: config.DefaultCell, region: region}
		var got []string
		for id := range pr.probes(p) {
			got = append(got, id)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("region %q runs %v, want %v", region, got, want)
		}
		if n := pr.checksRun(p); n != len(want) {
			t.Errorf("region %q: checksRun %d, want %d", region, n, len(want))
		}
	}
}
