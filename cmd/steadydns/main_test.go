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

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "steadydns")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	return bin
}

func run(bin string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	return 0, stdout.String(), stderr.String()
}

// TestCheck: the examples pass `steadydns check`; a bad config fails with
// the file, line and key.
func TestCheck(t *testing.T) {
	bin := build(t)
	examples, _ := filepath.Glob("../../examples/*/steadydns.yaml")
	if len(examples) == 0 {
		t.Fatal("no examples found")
	}
	for _, ex := range examples {
		if code, out, errOut := run(bin, "check", "--skip-host", "--config", ex); code != 0 || !strings.HasSuffix(out, ": ok\n") {
			t.Errorf("check %s: exit %d\n%s%s", ex, code, out, errOut)
		}
	}

	dir := t.TempDir()
	good, err := os.ReadFile("../../examples/quickstart/steadydns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	zone, _ := os.ReadFile("../../examples/quickstart/example.test.zone")
	os.WriteFile(filepath.Join(dir, "example.test.zone"), zone, 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, bytes.Replace(good, []byte("check: web2 }"), []byte("check: web9 }"), 1), 0o644)
	code, _, errOut := run(bin, "check", "--skip-host", "--config", bad)
	if code != 1 || !strings.Contains(errOut, bad+":45: records[0].answers[1].check:") || !strings.Contains(errOut, "web9") {
		t.Errorf("check of a bad config: exit %d, stderr %q; want exit 1 naming %s:45: records[0].answers[1].check", code, errOut, bad)
	}

	// Without --skip-host the interfaces must exist here, in this network
	// namespace: an interface that does not is refused, naming its key.
	for _, tc := range []struct {
		iface string
		code  int
		want  string
	}{
		{"sdnone9", 1, ":5: server.interfaces[0]: no interface \"sdnone9\" on this host"},
		{"lo", 0, ": ok"},
	} {
		cfg := filepath.Join(dir, tc.iface+".yaml")
		os.WriteFile(cfg, bytes.Replace(good, []byte("interfaces: [sde0]"), []byte("interfaces: ["+tc.iface+"]"), 1), 0o644)
		code, out, errOut := run(bin, "check", "--config", cfg)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("check with interface %s: exit %d\n%s%s\nwant exit %d with %q", tc.iface, code, out, errOut, tc.code, tc.want)
		}
	}

	if code, out, _ := run(bin, "version"); code != 0 || !strings.HasPrefix(out, "steadydns") {
		t.Errorf("version: exit %d %q", code, out)
	}
	if code, _, _ := run(bin, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	if code, _, errOut := run(bin, "bench"); code != 2 || strings.Contains(errOut, "  bench") {
		t.Errorf("bench: exit %d, want 2 with a usage that has no bench:\n%s", code, errOut)
	}
}

// TestNoBenchmark: the server binary, which every edge host runs, links
// neither the benchmark harness nor its charting libraries; they live in
// steadydns-bench.
func TestNoBenchmark(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps printed %d packages, too few to be the server's:\n%s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/steadydns/steadydns/bench/") || strings.HasPrefix(p, "gonum.org/") {
			t.Errorf("steadydns links %s", p)
		}
	}
}

// TestDocsStandAlone: every package has a README.md, and no source or doc
// cites a document that is not in the repository. Users have only the
// repository, so what they need belongs in its own docs/.
func TestDocsStandAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) < 10 {
		t.Fatalf("go list printed %d packages, too few to be the module's:\n%s", len(dirs), out)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "README.md")); err != nil {
			t.Errorf("package %s has no README.md", d)
		}
	}

	// Spelled in pieces so that neither this file nor a grep for the
	// names finds them here.
	design, notes := strings.ToUpper("design"), strings.ToUpper("notes")
	outside := []string{design + ".md", design + " §", notes + ".md", ".." + "/shared"}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != root && strings.HasPrefix(e.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".c", ".h":
		default:
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range outside {
			if bytes.Contains(b, []byte(s)) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s mentions %q, which is not in the repository: state the fact or point at docs/", rel, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	if files < 100 {
		t.Fatalf("read %d files under %s, too few to be the repository", files, root)
	}
}

// TestHelp: asking a command for its usage is a success, exit 0.
func TestHelp(t *testing.T) {
	bin := build(t)
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"check", "--help"}, {"--help"}} {
		code, out, errOut := run(bin, args...)
		if code != 0 || !strings.Contains(out+errOut, "config") {
			t.Errorf("steadydns %s: exit %d, want 0 with the usage\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if code, _, errOut := run(bin, "serve", "--log-format", "xml", "--config", "x.yaml"); code != 1 || !strings.Contains(errOut, "--log-format") {
		t.Errorf("serve --log-format xml: exit %d, want 1 naming the flag\n%s", code, errOut)
	}
}
