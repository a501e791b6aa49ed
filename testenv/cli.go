package testenv

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Up builds the environment for the CLI (`steadydns testenv up`). The
// namespaces are bind-mounted under /var/run/netns, so they outlive the
// process; the CLI just exits without calling Close, and Down removes them.
// Everything Down needs follows from the names, so no state is written.
func Up(opts Options) (*Env, error) {
	return New(opts)
}

// Down removes every namespace this package names with prefix, and any such
// links in the root namespace. It finds them by name, so it also cleans up
// after a crashed test, and does nothing when nothing is there.
func Down(prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	var errs []error
	entries, err := os.ReadDir(nsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("listing %s: %w", nsDir, err))
	}
	for _, ent := range entries {
		if ownsNS(prefix, ent.Name()) {
			errs = append(errs, destroyNS(ent.Name()))
		}
	}
	errs = append(errs, deleteRootLinks(prefix))
	return errors.Join(errs...)
}

// destroyNS deletes a namespace left behind by another process. Its links
// go first, for the same reason as in Host.close.
func destroyNS(name string) error {
	h := &Host{Name: name, ns: netns.None(), created: true}
	if ns, err := netns.GetFromPath(nsPath(name)); err == nil {
		h.ns = ns
		if nl, err := netlink.NewHandleAt(ns); err == nil {
			h.nl = nl
		}
	}
	return h.close()
}

// deleteRootLinks removes veths and bridges with our names from the root
// namespace. New never puts links there, but an older or interrupted tool
// might have.
func deleteRootLinks(prefix string) error {
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	var errs []error
	for _, l := range links {
		if t := l.Type(); (t != "veth" && t != "bridge") || !ownsLink(prefix, l.Attrs().Name) {
			continue
		}
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}
