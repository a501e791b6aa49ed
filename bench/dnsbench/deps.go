package dnsbench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
)

// tool is a program the harness runs and the Debian package that has it.
type tool struct{ bin, pkg string }

var (
	baseTools = []tool{
		{"kxdpgun", "knot-dnsutils"}, {"dnsperf", "dnsperf"}, {"ethtool", "ethtool"},
		{"ip", "iproute2"}, {"nsenter", "util-linux"}, {"taskset", "util-linux"},
	}
	serverTools = map[string]tool{
		"knot": {"knotd", "knot"}, "knot-xdp": {"knotd", "knot"},
		"knot-signed": {"knotd", "knot"}, "knot-xdp-signed": {"knotd", "knot"},
		"nsd": {"nsd", "nsd"}, "gdnsd": {"gdnsd", "gdnsd"},
	}
)

// ensureTools installs from Debian the packages whose programs the run
// needs and this machine lacks, and says which. Debian's knot, nsd and
// gdnsd packages enable their system services, which on a host with systemd
// start on port 53 of the root namespace; the harness runs its own copies
// in the server namespace and never uses those.
func ensureTools(log io.Writer, servers []string) error {
	tools := slices.Clone(baseTools)
	for _, s := range servers {
		if t, ok := serverTools[s]; ok {
			tools = append(tools, t)
		}
	}
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t.bin); err != nil && !slices.Contains(missing, t.pkg) {
			missing = append(missing, t.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	fmt.Fprintf(log, "bench: installing %v from Debian\n", missing)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	update := exec.Command("apt-get", "update", "-q")
	update.Env = env
	if out, err := update.CombinedOutput(); err != nil {
		return fmt.Errorf("running apt-get update: %w\n%s", err, out)
	}
	install := exec.Command("apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, missing...)...)
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("installing %v: %w\n%s", missing, err, out)
	}
	return nil
}
