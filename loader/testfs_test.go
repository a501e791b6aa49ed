package loader

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mountTestFS mounts a private bpffs so that tests never touch the pins of
// a running server.
func mountTestFS(t testing.TB) string {
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mounting a test bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func mustCPUs(t *testing.T) int {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
