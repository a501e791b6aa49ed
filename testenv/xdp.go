package testenv

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// AttachPass attaches prog, an XDP program that returns XDP_PASS, to the
// client's veth in native mode. A veth in native mode delivers XDP_TX frames
// from the edge to its peer only if the peer has an XDP program too; without
// one the edge's replies are dropped silently.
//
// It attaches through netlink rather than a bpf_link, so the program stays
// after the process exits (`steadydns testenv up` relies on that) and goes
// with the veth when the environment is torn down.
func (e *Env) AttachPass(prog *ebpf.Program) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("attaching xdp pass: environment is closed")
	}
	// UPDATE_IF_NOEXIST: never replace a program someone else attached.
	if err := e.setXDP(prog.FD(), nl.XDP_FLAGS_DRV_MODE|nl.XDP_FLAGS_UPDATE_IF_NOEXIST); err != nil {
		return fmt.Errorf("attaching xdp pass to %s: %w", e.Client.Link, err)
	}
	return nil
}

// DetachPass removes the XDP program from the client's veth, for tools such
// as kxdpgun that bring their own and cannot attach while another is there.
// Without one attached it does nothing.
func (e *Env) DetachPass() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.detachPass()
}

func (e *Env) detachPass() error {
	if e.Client == nil || e.Client.nl == nil {
		return nil
	}
	l, err := e.Client.nl.LinkByName(e.Client.Link)
	var gone netlink.LinkNotFoundError
	if errors.As(err, &gone) {
		return nil // the veth went with its namespace, and its program with it
	}
	if err != nil {
		return fmt.Errorf("finding %s: %w", e.Client.Link, err)
	}
	if x := l.Attrs().Xdp; x == nil || !x.Attached {
		return nil
	}
	if err := e.setXDP(-1, nl.XDP_FLAGS_DRV_MODE); err != nil {
		return fmt.Errorf("detaching xdp pass from %s: %w", e.Client.Link, err)
	}
	return nil
}

// setXDP sets the client veth's XDP program through netlink; the package
// functions work in the calling thread's namespace, hence Do.
func (e *Env) setXDP(fd, flags int) error {
	return e.Client.Do(func() error {
		l, err := netlink.LinkByName(e.Client.Link)
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(l, fd, flags)
	})
}
