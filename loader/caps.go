package loader

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// capability is one Linux capability the data plane needs.
type capability struct {
	bit  uint
	name string
}

var (
	capBPF     = capability{unix.CAP_BPF, "CAP_BPF"}         // create maps, load programs
	capPerfmon = capability{unix.CAP_PERFMON, "CAP_PERFMON"} // pointer arithmetic on packet data, which the verifier refuses without it
	capNetAdm  = capability{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}
)

// missingCaps names the capabilities of want that this process does not
// have in its effective set. CAP_SYS_ADMIN stands in for all of them, as it
// does in the kernel for BPF. It returns nil when the set cannot be read:
// the kernel's own error then stands alone.
func missingCaps(want ...capability) []string {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil
	}
	has := func(bit uint) bool { return data[bit/32].Effective&(1<<(bit%32)) != 0 }
	if has(unix.CAP_SYS_ADMIN) {
		return nil
	}
	var out []string
	for _, c := range want {
		if !has(c.bit) {
			out = append(out, c.name)
		}
	}
	return out
}

// permissionError says which capabilities are missing when the kernel
// refused an operation for want of privilege, in one line: the verifier's
// log for a refused pointer operation runs to a hundred lines and never
// names the capability. Other errors come back as they are.
func permissionError(err error, want ...capability) error {
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return err
	}
	missing := missingCaps(want...)
	if len(missing) == 0 {
		return err
	}
	pronoun := "it"
	if len(missing) > 1 {
		pronoun = "them"
	}
	return fmt.Errorf("the process lacks %s: run as root or grant %s, as deploy/steadydns.service does: %w",
		strings.Join(missing, " and "), pronoun, err)
}
