package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/testenv"
)

// poolConfig has two pools: failover, whose 2 lowest-priority answers of
// 20 have a check nothing answers, and multivalue, 64 answers without
// checks.
func poolConfig() string {
	var b strings.Builder
	b.WriteString(`server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0}
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  dead: { type: tcp, target: 198.18.1.1, port: 81, interval: 200ms, timeout: 100ms }
records:
  - name: failover.example.test.
    type: A
    policy: failover
    answers:
`)
	for i := 1; i <= 20; i++ {
		if i <= 18 {
			fmt.Fprintf(&b, "      - { value: 198.18.2.%d, priority: 1 }\n", i)
		} else {
			fmt.Fprintf(&b, "      - { value: 198.18.2.%d, priority: 0, check: dead }\n", i)
		}
	}
	b.WriteString("  - name: multi.example.test.\n    type: A\n    answers:\n")
	for i := 1; i <= 64; i++ {
		fmt.Fprintf(&b, "      - value: 198.18.3.%d\n", i)
	}
	b.WriteString("aggregation:\n  push_interval: 100ms\n")
	return b.String()
}

// TestPoolEndToEnd: `check` accepts sets of 20 and 64 answers, `serve`
// answers them on both paths, XDP (UDP) and the fallback (TCP): the
// failover set its first eight of the next priority once the lowest is
// down, the multivalue set eight of its 64; `status` lists every answer.
func TestPoolEndToEnd(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	e := newEdgeHost(t, env, bin, poolConfig(), map[string]string{"example.test.zone": crashZone})
	if out, err := env.Edge.Command(bin, "check", "--config", e.cfg).CombinedOutput(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	e.serve("serve")
	waitServing(t, env)

	var want []string
	for i := 1; i <= 8; i++ {
		want = append(want, fmt.Sprintf("198.18.2.%d", i))
	}
	slices.Sort(want)
	waitBothPaths(t, env, "the lowest priority down", "failover", want)
	for _, proto := range []string{"udp", "tcp"} {
		got := askPath(t, env, proto, "multi")
		if len(got) != 8 || len(slices.Compact(got)) != 8 {
			t.Errorf("multi over %s: %v, want 8 distinct answers of 64", proto, got)
		}
		for _, a := range got {
			if !strings.HasPrefix(a, "198.18.3.") {
				t.Errorf("multi over %s: answer %s is not the set's", proto, a)
			}
		}
	}

	out, err := env.Edge.Command(bin, "status", "--config", e.cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, a := range []string{"198.18.2.20", "198.18.3.64"} {
		if !strings.Contains(string(out), a) {
			t.Errorf("status does not list %s:\n%s", a, out)
		}
	}
}
