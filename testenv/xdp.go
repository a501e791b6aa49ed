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
	return attachPass(e.Client, e.Client.Link, prog)
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
	if e.Client == nil {
		return nil
	}
	return detachPass(e.Client, e.Client.Link)
}

// AttachPass attaches prog, an XDP program that returns XDP_PASS, in native
// mode to every edge's port on the switch, the peer of the edge's veth. An
// edge whose own veth runs XDP in native mode then gets its XDP_TX replies
// through; in generic mode they arrive without it. Like Env.AttachPass it
// uses netlink, so the programs stay after the process exits and go with the
// switch.
func (f *Fleet) AttachPass(prog *ebpf.Program) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("attaching xdp pass: fleet is closed")
	}
	for _, e := range f.Edges {
		if err := attachPass(f.Switch, e.Peer, prog); err != nil {
			return err
		}
	}
	return nil
}

// DetachPass removes the programs AttachPass attached.
func (f *Fleet) DetachPass() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, e := range f.Edges {
		errs = append(errs, detachPass(f.Switch, e.Peer))
	}
	return errors.Join(errs...)
}

func attachPass(h *Host, link string, prog *ebpf.Program) error {
	// UPDATE_IF_NOEXIST: never replace a program someone else attached.
	if err := setXDP(h, link, prog.FD(), nl.XDP_FLAGS_DRV_MODE|nl.XDP_FLAGS_UPDATE_IF_NOEXIST); err != nil {
		return fmt.Errorf("attaching xdp pass to %s: %w", link, err)
	}
	return nil
}

// detachPass does nothing when no program is attached, or when the link or
// the host is gone, and the program with them.
func detachPass(h *Host, link string) error {
	if h.nl == nil {
		return nil
	}
	l, err := h.nl.LinkByName(link)
	var gone netlink.LinkNotFoundError
	if errors.As(err, &gone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding %s: %w", link, err)
	}
	if x := l.Attrs().Xdp; x == nil || !x.Attached {
		return nil
	}
	if err := setXDP(h, link, -1, nl.XDP_FLAGS_DRV_MODE); err != nil {
		return fmt.Errorf("detaching xdp pass from %s: %w", link, err)
	}
	return nil
}

// setXDP sets a link's XDP program through netlink; the package functions
// work in the calling thread's namespace, hence Do.
func setXDP(h *Host, link string, fd, flags int) error {
	return h.Do(func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(l, fd, flags)
	})
}
