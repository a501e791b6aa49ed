package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build compiles steadydns-bench alone into an empty directory, so no
// steadydns binary sits beside it.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "steadydns-bench")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	return bin
}

// invoke runs the binary with PATH reduced to an empty directory, so that a
// steadydns installed on this machine cannot be found by accident.
func invoke(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + t.TempDir()}
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// TestFlags: -h lists every flag, and bad input is refused before
// anything is built or installed. Every case fails in the options'
// checks, which run before the harness touches the machine.
func TestFlags(t *testing.T) {
	bin := build(t)
	code, out := invoke(t, bin, "-h")
	if code != 0 || !strings.HasPrefix(out, "usage: steadydns-bench") {
		t.Errorf("-h: exit %d, want 0 and the usage:\n%s", code, out)
	}
	for _, f := range []string{"quick", "names", "rate", "latency-rate", "duration", "runs", "out",
		"servers", "settle", "prefix", "push-rounds", "work-names", "work-k", "work-static", "work-policy", "compare-down", "binary"} {
		if !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") {
			t.Errorf("-h does not list --%s:\n%s", f, out)
		}
	}

	if code, out := invoke(t, bin, "--no-such-flag"); code != 2 || !strings.Contains(out, "no-such-flag") {
		t.Errorf("an unknown flag: exit %d, want 2:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "quick"); code != 1 || !strings.Contains(out, `unexpected argument "quick"`) {
		t.Errorf("a stray argument: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "--servers", "reflector,bind"); code != 1 || !strings.Contains(out, `unknown server "bind"`) {
		t.Errorf("an unknown server: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "--work-names", "1000,many"); code != 1 || !strings.Contains(out, "--work-names") {
		t.Errorf("a bad --work-names: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "--work-policy", "random"); code != 1 || !strings.Contains(out, `constant-work policy "random"`) {
		t.Errorf("an unknown policy: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "--work-k", "3"); code != 1 || !strings.Contains(out, "constant-work K 3") {
		t.Errorf("an odd K of health-checked multivalue sets: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "--compare-down", "25"); code != 1 || !strings.Contains(out, "compare down 25%") {
		t.Errorf("a share down the harness has no table for: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "--work-k", "1,9"); code != 1 || !strings.Contains(out, "constant-work K 9") {
		t.Errorf("a K past the set's candidates: exit %d, want 1:\n%s", code, out)
	}
}

// TestBinary: the steadydns servers need the server binary, found beside
// steadydns-bench or on PATH, or named by --binary; without one the run
// stops at once and says where it looked.
func TestBinary(t *testing.T) {
	bin := build(t)
	beside := filepath.Join(filepath.Dir(bin), "steadydns")
	code, out := invoke(t, bin, "--servers", "reflector,steadydns")
	if code != 1 || !strings.Contains(out, "finding the steadydns binary") || !strings.Contains(out, beside) {
		t.Errorf("no steadydns anywhere: exit %d, want 1 naming %s:\n%s", code, out, beside)
	}
	missing := filepath.Join(t.TempDir(), "steadydns")
	code, out = invoke(t, bin, "--servers", "steadydns-fallback", "--binary", missing)
	if code != 1 || !strings.Contains(out, missing) {
		t.Errorf("--binary %s that does not exist: exit %d, want 1 naming it:\n%s", missing, code, out)
	}
	if err := os.WriteFile(missing, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = invoke(t, bin, "--servers", "steadydns", "--binary", missing)
	if code != 1 || !strings.Contains(out, missing) {
		t.Errorf("--binary %s that is not executable: exit %d, want 1 naming it:\n%s", missing, code, out)
	}
}

// TestFleetFlags: `steadydns-bench fleet` has its own flags, refuses bad
// ones before anything runs, and needs the server binary its aggregators
// run.
func TestFleetFlags(t *testing.T) {
	bin := build(t)
	code, out := invoke(t, bin, "fleet", "-h")
	if code != 0 || !strings.HasPrefix(out, "usage: steadydns-bench fleet") {
		t.Errorf("fleet -h: exit %d, want 0 and the usage:\n%s", code, out)
	}
	for _, f := range []string{"quick", "push", "pushes", "runs", "checker-steps", "edge-steps", "prober-steps", "prefix", "binary", "out"} {
		if !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") {
			t.Errorf("fleet -h does not list --%s:\n%s", f, out)
		}
	}
	if code, out := invoke(t, bin, "fleet", "--edge-steps", "10,many"); code != 1 || !strings.Contains(out, "--edge-steps") {
		t.Errorf("a bad --edge-steps: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "fleet", "--pushes", "1"); code != 1 || !strings.Contains(out, "at least 2 pushes") {
		t.Errorf("--pushes 1: exit %d, want 1:\n%s", code, out)
	}
	beside := filepath.Join(filepath.Dir(bin), "steadydns")
	if code, out := invoke(t, bin, "fleet", "--quick"); code != 1 || !strings.Contains(out, beside) {
		t.Errorf("fleet without steadydns: exit %d, want 1 naming %s:\n%s", code, out, beside)
	}
}

// TestLoadFlags: `steadydns-bench load` has its own flags and refuses bad
// values before anything runs.
func TestLoadFlags(t *testing.T) {
	bin := build(t)
	code, out := invoke(t, bin, "load", "-h")
	if code != 0 || !strings.HasPrefix(out, "usage: steadydns-bench load") {
		t.Errorf("load -h: exit %d, want 0 and the usage:\n%s", code, out)
	}
	for _, f := range []string{"names", "rate", "binary", "prefix", "out"} {
		if !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") {
			t.Errorf("load -h does not list --%s:\n%s", f, out)
		}
	}
	if code, out := invoke(t, bin, "load", "--names", "10"); code != 1 || !strings.Contains(out, "at least 50") {
		t.Errorf("--names 10: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "load", "--rate", "10"); code != 1 || !strings.Contains(out, "at least 100") {
		t.Errorf("--rate 10: exit %d, want 1:\n%s", code, out)
	}
	if code, out := invoke(t, bin, "load", "extra"); code != 1 || !strings.Contains(out, `"extra"`) {
		t.Errorf("a stray argument: exit %d, want 1:\n%s", code, out)
	}
}
