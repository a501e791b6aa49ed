package testenv

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AttachPass attaches prog, an XDP program that returns XDP_PASS, to the
// client's veth in native mode. A veth in native mode delivers XDP_TX frames
// from the edge to its peer only if the peer has an XDP program too; without
// one the edge's replies are dropped silently.
func (e *Env) AttachPass(prog *ebpf.Program) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("attaching xdp pass: environment is closed")
	}
	if e.pass != nil {
		return fmt.Errorf("attaching xdp pass to %s: already attached", e.Client.Link)
	}
	l, err := e.Client.nl.LinkByName(e.Client.Link)
	if err != nil {
		return fmt.Errorf("finding %s: %w", e.Client.Link, err)
	}
	// The kernel resolves the ifindex in the caller's namespace, so attach
	// from inside the client's.
	err = e.Client.Do(func() error {
		e.pass, err = link.AttachXDP(link.XDPOptions{
			Program:   prog,
			Interface: l.Attrs().Index,
			Flags:     link.XDPDriverMode,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("attaching xdp pass to %s: %w", e.Client.Link, err)
	}
	return nil
}

// DetachPass removes the program AttachPass attached, for tools such as
// kxdpgun that bring their own and cannot attach while another is there.
// Without one attached it does nothing.
func (e *Env) DetachPass() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.detachPass()
}

func (e *Env) detachPass() error {
	if e.pass == nil {
		return nil
	}
	err := e.pass.Close()
	e.pass = nil
	if err != nil {
		return fmt.Errorf("detaching xdp pass from %s: %w", e.Client.Link, err)
	}
	return nil
}
