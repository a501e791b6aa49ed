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

// TestSaturationMarkdown: the socket servers' rates at saturation, and the
// fallback's over the best of the others, not over itself or the XDP
// servers, which have no such run.
func TestSaturationMarkdown(t *testing.T) {
	sat := func(k float64) stats.Summary { return stats.Summarize([]float64{k * 1e3}) }
	var b bytes.Buffer
	saturationMarkdown(&b, []ServerResult{
		{Name: "steadydns"},
		{Name: "steadydns-fallback", Saturated: sat(150)},
		{Name: "nsd", Saturated: sat(120)},
		{Name: "gdnsd", Saturated: sat(160)},
	}, 400_000)
	for _, want := range []string{"offered 400 k/s", "| steadydns-fallback | 150 |", "| gdnsd | 160 |", "0.94× the best of the others"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "| steadydns |") {
		t.Errorf("an XDP server has a row:\n%s", b.String())
	}
	b.Reset()
	saturationMarkdown(&b, []ServerResult{{Name: "steadydns"}}, 400_000)
	if b.Len() != 0 {
		t.Errorf("a section without socket servers:\n%s", b.String())
	}
}

// TestParseStreamRun reads dnsperf's statistics: the rate and the lost
// queries, not the connections' latency that follows them.
func TestParseStreamRun(t *testing.T) {
	out := `Statistics:

  Queries sent:         96116
  Queries completed:    96104 (99.99%)
  Queries lost:         12 (0.01%)

  Response codes:       NOERROR 96104 (100.00%)
  Run time (s):         1.000104
  Queries per second:   96094.006223

  Average Latency (s):  0.000084 (min 0.000012, max 0.002532)

Connection Statistics:

  Reconnections:        0
`
	got, err := parseStreamRun([]byte(out))
	if err != nil || got.rate != 96094.006223 || got.lost != 12 {
		t.Errorf("%+v, %v; want 96094.006223 q/s and 12 lost", got, err)
	}
	if _, err := parseStreamRun([]byte("Error: failed to connect\n")); err == nil {
		t.Error("output without a rate read as a run")
	}
}

// TestTCPMarkdown: the socket servers' TCP rates, the fallback's over the
// best of the others', and who lost queries.
func TestTCPMarkdown(t *testing.T) {
	k := func(k float64) stats.Summary { return stats.Summarize([]float64{k * 1e3}) }
	var b bytes.Buffer
	tcpMarkdown(&b, []ServerResult{
		{Name: "steadydns"},
		{Name: "steadydns-fallback", TCP: k(200)},
		{Name: "knot", TCP: k(60), TCPLost: 7},
		{Name: "gdnsd", TCP: k(80)},
	}, 400_000)
	for _, want := range []string{"offered each socket server 400 k/s over TCP", "| steadydns-fallback | 200 |", "| gdnsd | 80 |", "2.50× the best of the others", "knot lost 7 queries"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "| steadydns |") {
		t.Errorf("an XDP server has a row:\n%s", b.String())
	}
}

// TestV6Markdown: each XDP server's IPv6 run beside its IPv4 one, its cost
// over the reflector's in the same family, and no row for a server
// without an IPv6 run.
func TestV6Markdown(t *testing.T) {
	one := func(v float64) stats.Summary { return stats.Summarize([]float64{v}) }
	var b bytes.Buffer
	v6Markdown(&b, []ServerResult{
		{Name: "reflector", Answered: one(1200e3), V6Answered: one(1100e3), KernelNs: one(50), V6Ns: one(55)},
		{Name: "steadydns", Answered: one(800e3), V6Answered: one(700e3), KernelNs: one(200), V6Ns: one(275)},
		{Name: "steadydns-fallback", Answered: one(180e3)},
	})
	for _, want := range []string{"| reflector | 1200 | 1100 | 50 | 55 | 1.0× | 1.0× |", "| steadydns | 800 | 700 | 200 | 275 | 4.0× | 5.0× |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "fallback") {
		t.Errorf("a server without an IPv6 run has a row:\n%s", b.String())
	}
	b.Reset()
	v6Markdown(&b, []ServerResult{{Name: "gdnsd"}})
	if b.Len() != 0 {
		t.Errorf("a section without IPv6 runs:\n%s", b.String())
	}
}

// TestDoTMarkdown: the DNS-over-TLS rates of the servers that speak it,
// the fallback's over NSD's, and none for the others.
func TestDoTMarkdown(t *testing.T) {
	k := func(k float64) stats.Summary { return stats.Summarize([]float64{k * 1e3}) }
	var b bytes.Buffer
	dotMarkdown(&b, []ServerResult{
		{Name: "steadydns-fallback", TCP: k(300), DoT: k(150), DoTLost: 3},
		{Name: "nsd", TCP: k(55), DoT: k(30)},
		{Name: "gdnsd", TCP: k(90)},
	}, 400_000)
	for _, want := range []string{"## Over TLS", "| steadydns-fallback | 150 |", "| nsd | 30 |", "5.00× the best of the others", "steadydns-fallback lost 3 queries over TLS"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "gdnsd") {
		t.Errorf("a server without DNS over TLS has a row:\n%s", b.String())
	}
}
