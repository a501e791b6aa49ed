package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/testenv"
)

// edgeHost is the files of a `steadydns serve` in env's edge host: a
// directory holding its config, zone and state, and a private bpffs that
// keeps its pins off a real server's.
type edgeHost struct {
	t     *testing.T
	env   *testenv.Env
	bin   string
	dir   string
	cfg   string // dir/steadydns.yaml
	state string // dir/state, the config's state_dir
}

// newEdgeHost writes files into a new directory, and the config as
// steadydns.yaml: a format of the edge's link, the pin path and the state
// directory, in that order. The test's end detaches what serve left.
func newEdgeHost(t *testing.T, env *testenv.Env, bin, config string, files map[string]string) *edgeHost {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	dir := t.TempDir()
	e := &edgeHost{t: t, env: env, bin: bin, dir: dir, cfg: filepath.Join(dir, "steadydns.yaml"), state: filepath.Join(dir, "state")}
	files["steadydns.yaml"] = fmt.Sprintf(config, env.Edge.Link, filepath.Join(mnt, "sd"), e.state)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if out, err := env.Edge.Command(bin, "detach", "--config", e.cfg).CombinedOutput(); err != nil {
			t.Errorf("detach: %v\n%s", err, out)
		}
	})
	return e
}

// serve starts `steadydns serve` on the config with args, as name.
func (e *edgeHost) serve(name string, args ...string) *exec.Cmd {
	return spawn(e.t, e.env.Edge, e.dir, name, e.bin, append([]string{"serve", "--config", e.cfg}, args...)...)
}

// spawn starts bin with args in host h, its output in dir/name.log, which
// the test shows if it fails; the test's end kills it.
func spawn(t *testing.T, h *testenv.Host, dir, name, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := h.Command(bin, args...)
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s's log:\n%s", name, tail(string(b), 60))
		}
	})
	return cmd
}
