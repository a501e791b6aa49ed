package deploy_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMakeInstall: `make install DESTDIR=... PREFIX=/usr` puts the server,
// the unit (naming the binary where it went), the system user, the docs and
// the examples in place, and the installed binary runs.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dest := t.TempDir()
	out, err := exec.Command("make", "-C", "..", "install", "DESTDIR="+dest, "PREFIX=/usr").CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	var got []string
	filepath.WalkDir(dest, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dest, path)
			got = append(got, "/"+rel)
		}
		return err
	})
	want := []string{
		"/usr/bin/steadydns",
		"/usr/lib/systemd/system/steadydns.service",
		"/usr/lib/sysusers.d/steadydns.conf",
		"/usr/share/doc/steadydns/README.md",
		"/usr/share/doc/steadydns/operations.md",
		"/usr/share/doc/steadydns/config.md",
		"/usr/share/doc/steadydns/examples/quickstart/steadydns.yaml",
		"/usr/share/doc/steadydns/examples/quickstart/example.test.zone",
		"/usr/share/doc/steadydns/examples/fleet/fleet.yaml",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("make install did not install %s; it installed:\n%s", w, strings.Join(got, "\n"))
		}
	}
	unit, err := os.ReadFile(filepath.Join(dest, "usr/lib/systemd/system/steadydns.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/bin/steadydns serve") || strings.Contains(string(unit), "/usr/local/") {
		t.Errorf("the installed unit does not run /usr/bin/steadydns alone:\n%s", unit)
	}
	if out, err := exec.Command(filepath.Join(dest, "usr/bin/steadydns"), "version").Output(); err != nil || !strings.HasPrefix(string(out), "steadydns") {
		t.Errorf("installed steadydns version: %v %q", err, out)
	}
}
