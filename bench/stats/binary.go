package stats

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ServerBinary is the steadydns binary beside the running executable,
// where `make build` puts it next to steadydns-bench, or else the one on
// PATH. Both harnesses measure the server binary that ships, not a copy of
// the server linked into themselves.
func ServerBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the running executable: %w", err)
	}
	beside := filepath.Join(filepath.Dir(exe), "steadydns")
	if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return beside, nil
	}
	bin, err := exec.LookPath("steadydns")
	if err != nil {
		return "", fmt.Errorf("none at %s or on PATH (make build puts one in bin/): %w", beside, err)
	}
	return bin, nil
}
