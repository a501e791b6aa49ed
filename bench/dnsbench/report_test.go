package dnsbench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/bench/stats"
	"github.com/steadydns/steadydns/internal/compliance"
)

func TestComplianceMarkdown(t *testing.T) {
	var b bytes.Buffer
	complianceMarkdown(&b, []ServerResult{
		{Name: "reflector"},
		{Name: "steadydns", Compliance: []compliance.Result{{Case: "dns"}, {Case: "opcodeflg"}}},
		{Name: "knot", Compliance: []compliance.Result{{Case: "dns"}, {Case: "opcodeflg", Tags: []string{"rd"}}}},
	})
	for _, want := range []string{
		"| case | steadydns | knot |",
		"| dns | ok | ok |",
		"| opcodeflg | ok | fail: rd |",
		"| **passed** | 2/2 | 1/2 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "reflector") {
		t.Errorf("the reflector, which ran no case, has a column:\n%s", b.String())
	}
}

// TestSlicedSpread: the paired slices' spread counts 0% down as 1, reads
// only its own size and K, and says so when they were not measured.
func TestSlicedSpread(t *testing.T) {
	levels := []LevelResult{
		{Names: 1000, K: 8, DownPct: 0, Ratio: stats.Summary{Median: 1}},
		{Names: 1000, K: 8, DownPct: 50, Ratio: stats.Summary{Median: 0.95}},
		{Names: 1000, K: 8, DownPct: 100, Ratio: stats.Summary{Median: 1.02}},
		{Names: 1000, K: 1, DownPct: 50, Ratio: stats.Summary{Median: 1.5}},
	}
	for _, c := range []struct {
		names, k int
		want     string
	}{{1000, 8, "7.4%"}, {1000, 1, "50.0%"}, {2000, 8, "—"}} {
		if got := slicedSpread(levels, c.names, c.k); got != c.want {
			t.Errorf("%d names, K=%d: spread %s, want %s", c.names, c.k, got, c.want)
		}
	}
}
