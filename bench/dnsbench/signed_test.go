package dnsbench

import (
	"bufio"
	"strings"
	"testing"
)

func TestPassedDNSSECIn(t *testing.T) {
	for _, c := range []struct {
		text string
		want uint64
	}{
		{"# TYPE steadydns_xdp_passed_total counter\n" +
			"steadydns_xdp_passed_total{reason=\"dns\"} 7\n" +
			"steadydns_xdp_passed_total{reason=\"dnssec\"} 1.234567e+06\n" +
			"steadydns_xdp_passed_total{reason=\"dnssec_other\"} 9\n", 1234567},
		{"steadydns_queries_total{outcome=\"dnssec\",path=\"xdp\"} 5\n", 0},
	} {
		got, err := passedDNSSECIn(bufio.NewScanner(strings.NewReader(c.text)))
		if err != nil || got != c.want {
			t.Errorf("passedDNSSECIn(%q) = %d, %v; want %d", c.text, got, err, c.want)
		}
	}
	if _, err := passedDNSSECIn(bufio.NewScanner(strings.NewReader("steadydns_xdp_passed_total{reason=\"dnssec\"} x\n"))); err == nil {
		t.Error("a count that is not a number was read")
	}
}
