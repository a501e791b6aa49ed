package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/testenv"
)

// rig is the test hosts and what every measurement shares.
type rig struct {
	o     Options
	dir   string // scratch: configs, logs, bpffs
	zone  *zone
	env   *testenv.Env
	pass  bpf.PassObjects
	bpffs string // a private bpffs mount, so no pin collides with a running edge
	cmds  []string
	// dotCert and dotKey are the PEM files of the servers' DNS over TLS.
	dotCert, dotKey string
}

func newRig(o Options, dir string, z *zone) (r *rig, err error) {
	prefix := o.Prefix
	if prefix == "" {
		prefix = testenv.UniquePrefix()
	}
	env, err := testenv.New(testenv.Options{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	r = &rig{o: o, dir: dir, zone: z, env: env, bpffs: filepath.Join(dir, "bpffs")}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
		}
	}()
	if err := os.Mkdir(r.bpffs, 0o700); err != nil {
		return r, fmt.Errorf("making the bpffs mount point: %w", err)
	}
	if err := unix.Mount("bpf", r.bpffs, "bpf", 0, "mode=0700"); err != nil {
		return r, fmt.Errorf("mounting bpffs at %s: %w", r.bpffs, err)
	}
	if r.dotCert, r.dotKey, err = writeDoTCert(dir); err != nil {
		return r, err
	}
	if err := bpf.LoadPassObjects(&r.pass, nil); err != nil {
		return r, fmt.Errorf("loading the xdp pass program: %w", err)
	}
	// A socket on a veth leaves only the pseudo-header sum in the UDP
	// checksum (CHECKSUM_PARTIAL). The reflector patches checksums
	// incrementally, so without this its replies to dnsperf would carry bad
	// checksums and be dropped. kxdpgun writes full checksums itself.
	if err := r.run(env.Client, "ethtool", "-K", env.Client.Link, "tx", "off"); err != nil {
		return r, err
	}
	// GRO gives the server's veth a NAPI instance even without XDP, so
	// userspace servers get a NAPI thread on the server CPU too, and the
	// thread survives XDP programs coming and going.
	if err := r.run(env.Edge, "ethtool", "-K", env.Edge.Link, "gro", "on"); err != nil {
		return r, err
	}
	return r, r.threadNAPI()
}

// threadNAPI moves the receive processing of the server's veth into a
// kernel thread. The sysfs file only shows a namespace's devices to a
// process that mounted sysfs inside it, which `ip netns exec` does.
func (r *rig) threadNAPI() error {
	e := r.env.Edge
	f := fmt.Sprintf("/sys/class/net/%s/threaded", e.Link)
	out, err := exec.Command("ip", "netns", "exec", e.Name, "sh", "-c", "echo 1 > "+f+" && cat "+f).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		return fmt.Errorf("making the napi of %s threaded: %v: %s", e.Link, err, out)
	}
	return nil
}

// pinNAPI pins the NAPI threads of the server's veth to the server CPU.
// Their names are napi/<dev>-<id>, cut to the kernel's 15 bytes.
func (r *rig) pinNAPI() error {
	prefix := r.napiPrefix()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	var set unix.CPUSet
	set.Set(r.o.ServerCPU)
	pinned := 0
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if err != nil || !strings.HasPrefix(string(comm), prefix) {
			continue
		}
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return fmt.Errorf("pinning %s to cpu %d: %w", strings.TrimSpace(string(comm)), r.o.ServerCPU, err)
		}
		pinned++
	}
	if pinned == 0 {
		return fmt.Errorf("pinning napi threads: no thread named %s*", prefix)
	}
	return nil
}

// napiPrefix is how the names of the server veth's NAPI threads begin:
// napi/<dev>-<id>, cut to the kernel's 15 bytes.
func (r *rig) napiPrefix() string {
	p := "napi/" + r.env.Edge.Link + "-"
	return p[:min(len(p), 15)]
}

// command runs name in h's network namespace on one CPU. taskset and
// nsenter both exec, so the process is the program itself.
func (r *rig) command(ctx context.Context, h *testenv.Host, cpu int, name string, args ...string) *exec.Cmd {
	argv := append([]string{"-c", strconv.Itoa(cpu), "nsenter", "--net=" + h.NSPath(), "--", name}, args...)
	return exec.CommandContext(ctx, "taskset", argv...)
}

// run runs a setup command in h's namespace and wants it to succeed.
func (r *rig) run(h *testenv.Host, name string, args ...string) error {
	out, err := h.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s %s in %s: %w: %s", name, strings.Join(args, " "), h.Name, err, out)
	}
	return nil
}

// record keeps a load command as it was run, for the report.
func (r *rig) record(c *exec.Cmd) {
	if s := strings.Join(c.Args, " "); !slices.Contains(r.cmds, s) {
		r.cmds = append(r.cmds, s)
	}
}

func (r *rig) close() error {
	var errs []error
	if r.env != nil {
		errs = append(errs, r.env.Close())
	}
	r.pass.Close()
	if err := unix.Unmount(r.bpffs, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmounting %s: %w", r.bpffs, err))
	}
	return errors.Join(errs...)
}
