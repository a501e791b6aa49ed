package daemon_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/testenv"
)

// TestStartFails makes each step of a start fail in turn: the start
// returns the error and undoes what it had started, in reverse. No
// goroutine of the prober, the aggregation, the fallback or the API is
// left, every port it bound can be bound again, and XDP is not attached.
// A start after all of them succeeds, and its Close leaves nothing
// running either; a failed restart leaves XDP attached as Close left it.
func TestStartFails(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, pins string) string // writes the config, returns its text
		block func(t *testing.T) func()                   // holds a resource the start needs
		want  string                                      // in the error
	}{
		{"config", func(t *testing.T, dir, pins string) string {
			return strings.Replace(edgeConfig(env, pins), "ttl: 30", "ttl: thirty", 1)
		}, nil, "records[0].ttl"},
		{"zones", func(t *testing.T, dir, pins string) string {
			os.Remove(filepath.Join(dir, "example.test.zone"))
			return edgeConfig(env, pins)
		}, nil, "zones[0].file"},
		{"loader", func(t *testing.T, dir, pins string) string {
			return edgeConfig(env, t.TempDir()+"/sd") // not a bpf file system
		}, nil, "not on a bpf file system"},
		{"fallback", func(t *testing.T, dir, pins string) string { return edgeConfig(env, pins) },
			func(t *testing.T) func() { return hold(t, env, "udp", "198.18.0.2:53") }, "198.18.0.2:53"},
		{"xdp", func(t *testing.T, dir, pins string) string {
			return strings.Replace(edgeConfig(env, pins), "interfaces: ["+env.Edge.Link+"]", "interfaces: ["+env.Edge.Link+", sdmissing0]", 1)
		}, nil, "attaching xdp to sdmissing0"},
		{"api", func(t *testing.T, dir, pins string) string { return edgeConfig(env, pins) },
			func(t *testing.T) func() { return hold(t, env, "tcp", "127.0.0.1:9153") }, "listening for the api on 127.0.0.1:9153"},
		{"api token open to others", func(t *testing.T, dir, pins string) string {
			state := filepath.Dir(pins) + ".state" // edgeConfig's
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(state, "api.token"), "0123456789abcdef\n") // mode 0644
			return edgeConfig(env, pins)
		}, nil, "api.token is open to others than its owner (mode 0644): chmod 600 it"},
		{"api token file empty", func(t *testing.T, dir, pins string) string {
			write(t, filepath.Join(dir, "api.token"), "\n")
			return strings.Replace(edgeConfig(env, pins), "api: 127.0.0.1:9153", "api: 127.0.0.1:9153\n  api_token_file: api.token", 1)
		}, nil, "server.api_token_file: reading the api token: " + "%s/api.token is empty"},
		{"state_dir full", func(t *testing.T, dir, pins string) string {
			return withState(fmt.Sprintf(configFile, env.Edge.Link, "generic", pins), fullDisk(t))
		}, nil, "no space left on device"},
		{"bpffs read-only", func(t *testing.T, dir, pins string) string {
			return edgeConfig(env, readOnlyBPFFS(t))
		}, nil, "read-only file system"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, pins := t.TempDir(), bpffs(t)
			cfg := filepath.Join(dir, "steadydns.yaml")
			write(t, filepath.Join(dir, "example.test.zone"), zoneFile)
			write(t, cfg, c.setup(t, dir, pins))
			release := func() {}
			if c.block != nil {
				release = c.block(t)
			}
			var d *daemon.Daemon
			err := env.Edge.Do(func() (err error) {
				d, err = daemon.StartWith(cfg, daemon.Options{Netns: env.Edge.Do})
				return err
			})
			if err == nil {
				d.Close()
				t.Fatal("the start succeeded")
			}
			if want := strings.ReplaceAll(c.want, "%s", dir); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want one about %q", err, c.want)
			}
			t.Logf("start failed: %v", err)
			release() // before the checks, which bind the same ports
			assertNothingLeft(t, env, pins)
		})
	}

	t.Run("close", func(t *testing.T) {
		pins := bpffs(t)
		dir := t.TempDir()
		cfg := filepath.Join(dir, "steadydns.yaml")
		write(t, filepath.Join(dir, "example.test.zone"), zoneFile)
		write(t, cfg, edgeConfig(env, pins))
		var d *daemon.Daemon
		if err := env.Edge.Do(func() (err error) {
			d, err = daemon.StartWith(cfg, daemon.Options{Netns: env.Edge.Do})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(leftovers()) == 0 {
			t.Fatal("a running daemon shows no goroutines: the check below would see nothing")
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		waitNoLeftovers(t)
		assertFree(t, env)
		// XDP stays attached after Close, by design: a restart does not
		// interrupt it.
		if !xdpAttached(t, env) {
			t.Error("XDP was detached by Close")
		}
		// A restart that fails leaves the link the earlier run pinned: it
		// answers as it did while no daemon ran.
		release := hold(t, env, "tcp", "127.0.0.1:9153")
		err := env.Edge.Do(func() (err error) {
			d, err = daemon.StartWith(cfg, daemon.Options{Netns: env.Edge.Do})
			return err
		})
		release()
		if err == nil {
			d.Close()
			t.Fatal("a restart with the api's address taken succeeded")
		}
		waitNoLeftovers(t)
		assertFree(t, env)
		if !xdpAttached(t, env) {
			t.Error("a failed restart detached the link an earlier run pinned")
		}
		if err := env.Edge.Do(func() error { return daemon.Detach(cfg) }); err != nil {
			t.Fatal(err)
		}
	})
}

// edgeConfig is the end-to-end config on env's edge link, pinned in pins,
// its state beside the bpffs mount that holds pins.
func edgeConfig(env *testenv.Env, pins string) string {
	mount := filepath.Dir(pins)
	return withState(fmt.Sprintf(configFile, env.Edge.Link, "generic", pins), mount+".state")
}

// bpffs mounts a private bpf file system and returns a pin directory in it.
func bpffs(t *testing.T) string {
	pins := t.TempDir()
	if err := unix.Mount("bpf", pins, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(pins, unix.MNT_DETACH) })
	return pins + "/sd"
}

// fullDisk returns a state directory on a file system with no space
// left: a small tmpfs, filled.
func fullDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mounting a small tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			return dir
		}
	}
}

// readOnlyBPFFS mounts a private bpf file system read-only and returns a
// pin directory in it.
func readOnlyBPFFS(t *testing.T) string {
	t.Helper()
	pins := t.TempDir()
	if err := unix.Mount("bpf", pins, "bpf", unix.MS_RDONLY, "mode=0700"); err != nil {
		t.Fatalf("mounting a read-only bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(pins, unix.MNT_DETACH) })
	return pins + "/sd"
}

// hold binds addr in the edge host until the returned func runs.
func hold(t *testing.T, env *testenv.Env, network, addr string) func() {
	t.Helper()
	var c interface{ Close() error }
	if err := env.Edge.Do(func() (err error) {
		if network == "udp" {
			c, err = net.ListenPacket(network, addr)
		} else {
			c, err = net.Listen(network, addr)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return func() { c.Close() }
}

func assertNothingLeft(t *testing.T, env *testenv.Env, pins string) {
	t.Helper()
	waitNoLeftovers(t)
	assertFree(t, env)
	if xdpAttached(t, env) {
		t.Error("XDP is still attached to the edge's link")
	}
	if links, _ := filepath.Glob(filepath.Join(pins, "link_*")); len(links) != 0 {
		t.Errorf("links still pinned: %v", links)
	}
}

// assertFree binds every address a daemon binds: the fallback's, UDP and
// TCP, and the API's.
func assertFree(t *testing.T, env *testenv.Env) {
	t.Helper()
	for _, a := range []struct{ network, addr string }{
		{"udp", "198.18.0.2:53"}, {"tcp", "198.18.0.2:53"}, {"udp", "[fd53::2]:53"}, {"tcp", "[fd53::2]:53"}, {"tcp", "127.0.0.1:9153"},
	} {
		err := env.Edge.Do(func() error {
			if a.network == "udp" {
				c, err := net.ListenPacket(a.network, a.addr)
				if err == nil {
					c.Close()
				}
				return err
			}
			l, err := net.Listen(a.network, a.addr)
			if err == nil {
				l.Close()
			}
			return err
		})
		if err != nil {
			t.Errorf("%s %s is still bound: %v", a.network, a.addr, err)
		}
	}
}

// xdpAttached reports whether an XDP program runs on the edge's link.
func xdpAttached(t *testing.T, env *testenv.Env) bool {
	t.Helper()
	var attached bool
	if err := env.Edge.Do(func() error {
		l, err := netlink.LinkByName(env.Edge.Link)
		if err != nil {
			return err
		}
		attached = l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return attached
}

// daemonFrames mark a goroutine a daemon started: the prober's, the
// aggregation's, the fallback's and the API's.
var daemonFrames = []string{
	"steadydns/prober.(*Scheduler)",
	"steadydns/prober.(*Framer).Run",
	"steadydns/controlplane/health.(*Aggregator).Run",
	"steadydns/controlplane/daemon.(*Daemon).start",
	"steadydns/controlplane/fallback.",
	"net/http.(*Server).Serve",
}

// leftovers returns the stacks of the goroutines a daemon started.
func leftovers() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, f := range daemonFrames {
			if strings.Contains(g, f) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// waitNoLeftovers waits for stopped goroutines to return, then fails if
// any is left.
func waitNoLeftovers(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := leftovers()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left running:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
