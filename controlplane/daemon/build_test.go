package daemon_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
)

// TestBuildMaxRecords checks that Build rejects a config whose record sets
// do not fit in the record maps, counting each name length class apart and
// the zone file's A and AAAA sets with the configured ones.
func TestBuildMaxRecords(t *testing.T) {
	long := strings.Repeat("x", 30) + ".example.test." // 45 wire bytes: map rr64
	tests := []struct {
		name  string
		max   int
		names []string // one A set each
		aaaa  bool     // an AAAA set for every name too
		zone  string   // lines added to the zone file
		want  string   // the error after "steadydns.yaml:", or "" for none
	}{
		{"over", 2, []string{"a.example.test.", "b.example.test.", "c.example.test."}, false, "",
			"3: server.max_records: 3 record sets go to map rr32 (wire names up to 32 bytes), more than the 2 it holds"},
		{"full", 3, []string{"a.example.test.", "b.example.test.", "c.example.test."}, false, "", ""},
		{"types count apart", 3, []string{"a.example.test.", "b.example.test."}, true, "",
			"3: server.max_records: 4 record sets go to map rr32 (wire names up to 32 bytes), more than the 3 it holds"},
		{"zone sets count", 2, []string{"a.example.test.", "b.example.test."}, false, "static 3600 A 198.18.1.20\n",
			"3: server.max_records: 3 record sets go to map rr32 (wire names up to 32 bytes), more than the 2 it holds"},
		{"classes count apart", 2, []string{"a.example.test.", "b.example.test.", long}, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var records strings.Builder
			for i, name := range tt.names {
				fmt.Fprintf(&records, "  - { name: %s, type: A, answers: [{value: 198.18.1.%d}] }\n", name, i+1)
				if tt.aaaa {
					fmt.Fprintf(&records, "  - { name: %s, type: AAAA, answers: [{value: \"fd53:1::%d\"}] }\n", name, i+1)
				}
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "steadydns.yaml")
			write(t, filepath.Join(dir, "example.test.zone"), "$ORIGIN example.test.\n@ 3600 SOA ns1.other.test. hostmaster 1 7200 3600 1209600 300\n@ 3600 NS ns1.other.test.\n"+tt.zone)
			write(t, path, fmt.Sprintf("server:\n  listen: [\"198.18.0.2:53\"]\n  max_records: %d\nzones:\n  - origin: example.test.\n    file: example.test.zone\nrecords:\n%s", tt.max, records.String()))
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = daemon.Build(cfg, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Build: %v", err)
			case tt.want != "" && (err == nil || err.Error() != path+":"+tt.want):
				t.Fatalf("Build: got %v\nwant %s:%s", err, path, tt.want)
			}
		})
	}
}
