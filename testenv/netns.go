package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nsDir is where ip(8) keeps named namespaces, so `ip netns exec` and
// `nsenter --net=` find ours.
const nsDir = "/var/run/netns"

func nsPath(name string) string { return filepath.Join(nsDir, name) }

// createNS makes a named namespace the way `ip netns add` does: unshare on a
// locked thread, bind-mount that thread's namespace file, and switch back.
// O_EXCL makes an existing name an error, so we never adopt (and later
// delete) a namespace that belongs to someone else.
func createNS(name string) (netns.NsHandle, error) {
	if err := os.MkdirAll(nsDir, 0o755); err != nil {
		return netns.None(), err
	}
	path := nsPath(name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return netns.None(), fmt.Errorf("%s already exists (left over from a crash? `steadydns testenv down` removes it)", path)
		}
		return netns.None(), err
	}
	f.Close()
	err = inNewNS(func() error {
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		return unix.Mount(self, path, "none", unix.MS_BIND, "")
	})
	if err == nil {
		var ns netns.NsHandle
		if ns, err = netns.GetFromPath(path); err == nil {
			return ns, nil
		}
	}
	return netns.None(), errors.Join(err, deleteNS(name))
}

// deleteNS unmounts and removes a named namespace. The kernel frees the
// namespace once nothing else (a process, an open fd) holds it. Missing or
// unmounted files are fine, so it also cleans up after a half-made createNS.
func deleteNS(name string) error {
	path := nsPath(name)
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// inNewNS runs fn on a locked thread moved into a fresh network namespace.
func inNewNS(fn func() error) (err error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("getting current netns: %w", err)
	}
	defer orig.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("unsharing netns: %w", err)
	}
	defer func() { err = errors.Join(err, leave(orig)) }()
	return fn()
}

// inNS runs fn on a locked thread switched into ns.
func inNS(ns netns.NsHandle, fn func() error) (err error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("getting current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns: %w", err)
	}
	defer func() { err = errors.Join(err, leave(orig)) }()
	return fn()
}

// leave switches the thread back to orig. If that fails the thread stays
// locked: the runtime then ends it with the goroutine instead of handing a
// thread in the wrong namespace to other goroutines.
func leave(orig netns.NsHandle) error {
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("restoring netns: %w", err)
	}
	runtime.UnlockOSThread()
	return nil
}
