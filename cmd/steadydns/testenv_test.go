package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/testenv"
)

// TestTestenvFleet drives the fleet through the CLI as a user would, each
// step in a process of its own: up, partition, heal and down, with the state
// only in the kernel between them.
func TestTestenvFleet(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	p := testenv.UniquePrefix()
	t.Cleanup(func() { testenv.Down(p) })
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(bin, append([]string{"testenv"}, args...)...)
		if code != 0 {
			t.Fatalf("steadydns testenv %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	// cuts lists, from a fresh look at the kernel, which of these pairs
	// are cut in both directions.
	cuts := func(pairs ...[2]string) []bool {
		t.Helper()
		f, err := testenv.OpenFleet(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var got []bool
		for _, pair := range pairs {
			a, err := f.Lookup(pair[0])
			if err != nil {
				t.Fatal(err)
			}
			b, err := f.Lookup(pair[1])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f.Cut(a[0], b[0]) && f.Cut(b[0], a[0]))
		}
		return got
	}

	out := must("up", "--fleet", "--prefix", p, "--regions", "2", "--probers-per-region", "1",
		"--edges", "1", "--aggregators", "2", "--backends", "1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("up --fleet printed %d hosts, want 7:\n%s", len(lines), out)
	}
	for i, want := range [][]string{
		{"client", p + "-c", p + "c", "198.18.64.1", "fd53:64::64:1"},
		{"e1", p + "-e1", p + "e1", "198.18.65.1", "fd53:64::65:1"},
		{"a2", p + "-a2", p + "a2", "198.18.66.2", "fd53:64::66:2"},
		{"p2a", p + "-p2a", p + "p2a", "198.18.72.1", "fd53:64::72:1"},
		{"b1", p + "-b1", p + "b1", "198.18.67.1", "fd53:64::67:1"},
	} {
		line := []int{0, 1, 3, 5, 6}[i]
		if got := strings.Fields(lines[line]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("up --fleet line %d: %q, want %q", line+1, got, want)
		}
	}
	if code, _, errOut := run(bin, "testenv", "up", "--fleet", "--prefix", p); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("a second up --fleet: exit %d, %q; want exit 1 and 'already exists'", code, errOut)
	}
	if code, _, errOut := run(bin, "testenv", "up", "--prefix", p+"x", "--edges", "3"); code != 1 || !strings.Contains(errOut, "--fleet") {
		t.Errorf("up --edges without --fleet: exit %d, %q; want exit 1 naming --fleet", code, errOut)
	}

	must("partition", "--prefix", p, "e1", "a2")
	must("partition", "--prefix", p, "r1", "b1")
	pairs := [][2]string{{"e1", "a2"}, {"p1a", "b1"}, {"e1", "a1"}, {"p2a", "b1"}}
	if got := cuts(pairs...); strings.Join(boolWords(got), " ") != "cut cut open open" {
		t.Errorf("after partition e1 a2 and r1 b1: %v are %v, want cut cut open open", pairs, boolWords(got))
	}
	must("heal", "--prefix", p, "a2", "e1")
	if got := cuts(pairs...); strings.Join(boolWords(got), " ") != "open cut open open" {
		t.Errorf("after heal a2 e1: %v are %v, want open cut open open", pairs, boolWords(got))
	}
	must("heal", "--prefix", p)
	if got := cuts(pairs...); strings.Join(boolWords(got), " ") != "open open open open" {
		t.Errorf("after heal: %v are %v, want all open", pairs, boolWords(got))
	}
	for _, args := range [][]string{
		{"partition", "--prefix", p, "e1", "e9"},
		{"partition", "--prefix", p, "e1"},
		{"heal", "--prefix", p, "e1"},
		{"partition", "--prefix", p + "x", "e1", "a1"},
	} {
		if code, _, errOut := run(bin, append([]string{"testenv"}, args...)...); code != 1 || errOut == "" {
			t.Errorf("testenv %s: exit %d, %q; want exit 1 with a message", strings.Join(args, " "), code, errOut)
		}
	}

	must("down", "--prefix", p)
	left, _ := filepath.Glob("/var/run/netns/" + p + "-*")
	if len(left) > 0 {
		t.Errorf("down left %v", left)
	}
	if _, err := os.Stat("/var/run/netns/" + p + "-sw"); !os.IsNotExist(err) {
		t.Errorf("the switch namespace is still there: %v", err)
	}
}

func boolWords(bs []bool) []string {
	var ws []string
	for _, b := range bs {
		w := "open"
		if b {
			w = "cut"
		}
		ws = append(ws, w)
	}
	return ws
}
