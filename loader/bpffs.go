package loader

import (
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
