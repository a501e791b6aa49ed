package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ensureBPFFS mounts bpffs at /sys/fs/bpf when the pin directory lies
// under it and nothing is mounted there; some hosts do not mount it at boot.
func ensureBPFFS(dir string) error {
	const root = "/sys/fs/bpf"
	var st unix.Statfs_t
	probe := dir
	for {
		if err := unix.Statfs(probe, &st); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return fmt.Errorf("finding the file system of %s: no existing parent", dir)
		}
		probe = parent
	}
	if st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if !strings.HasPrefix(filepath.Clean(dir)+"/", root+"/") {
		return fmt.Errorf("pinning under %s: not on a bpf file system (mount one with: mount -t bpf bpf %s)", dir, filepath.Dir(dir))
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", root, err)
	}
	if err := unix.Mount("bpf", root, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mounting bpffs at %s: %w", root, err)
	}
	return nil
}

// PrivateBPFFS reports whether the bpf file system holding dir is one the
// host's mount namespace does not see. Pins there go away with this
// process's mount namespace, and the XDP link with them, so XDP stops
// answering when the process exits. `ip netns exec` does this: it gives the
// command a mount namespace of its own with a fresh /sys, where ensureBPFFS
// then mounts a bpffs no one else sees. The host's view is that of process
// 1 or, where it may not be read (some containers), that of the parent
// process, which for `ip netns exec` is the shell that ran it. It reports
// false when it cannot tell.
func PrivateBPFFS(dir string) bool {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return false
	}
	for _, pid := range []int{1, os.Getppid()} {
		other, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil {
			continue
		}
		if other == self {
			return false
		}
		return otherFS(fmt.Sprintf("/proc/%d/root", pid), dir)
	}
	return false
}

// otherFS reports whether dir lies on another file system here than under
// root, another process's view of the file tree. Another mount namespace,
// as under systemd's ProtectSystem, still shares the host's bpffs when the
// mount propagated, so the two are compared by device, at the deepest
// directory of dir that exists here.
func otherFS(root, dir string) bool {
	probe := dir
	var here unix.Stat_t
	for unix.Stat(probe, &here) != nil {
		parent := filepath.Dir(probe)
		if parent == probe {
			return false
		}
		probe = parent
	}
	var there unix.Stat_t
	switch err := unix.Stat(root+probe, &there); {
	case errors.Is(err, unix.ENOENT):
		return true // the directory is not there at all
	case err != nil:
		return false
	}
	return here.Dev != there.Dev
}
