package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/steadydns/steadydns/testenv"
)

// TestFleetDemo runs the script of `make demo-fleet` end to end under a
// prefix of its own. The script checks every step it narrates and exits
// non-zero at the first that fails, so its exit status is the test.
func TestFleetDemo(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	t.Parallel()
	for _, tool := range []string{"bash", "dig", "curl", "jq", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the demo needs %s (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	bin := build(t)
	p := testenv.UniquePrefix()
	t.Cleanup(func() { testenv.Down(p) })
	cmd := exec.Command("bash", "../../scripts/demo-fleet.sh")
	cmd.Env = append(os.Environ(), "BIN="+bin, "P="+p)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("demo-fleet: %v\n%s", err, out)
	}
	t.Logf("demo-fleet:\n%s", out)
	for _, step := range []string{"testenv partition r1 b1", "every region loses b1", "b1 left both edges' answers",
		"testenv heal", "both edges follow the other aggregator", "torn down"} {
		if !strings.Contains(out, step) {
			t.Errorf("the demo's output lacks %q", step)
		}
	}
	if _, err := os.Stat("/var/run/netns/" + p + "-c"); err == nil {
		t.Errorf("the demo left its namespaces behind")
	}
}
