package loader

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/link"
)

// Mode is how XDP is attached.
type Mode string

const (
	ModeAuto    Mode = "auto"    // native, falling back to generic with a warning
	ModeNative  Mode = "native"  // driver mode only
	ModeGeneric Mode = "generic" // skb mode only
)

// Attach attaches the program to the interface through a pinned bpf_link.
// A link already pinned for the interface by an earlier run is updated in
// place, so queries keep being answered across a restart. It returns the
// mode the program runs in.
func (o *Objects) Attach(ifname string, mode Mode) (Mode, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return "", fmt.Errorf("attaching xdp to %s: %w", ifname, err)
	}
	pin := o.linkPin(ifname)
	if l, err := link.LoadPinnedLink(pin, nil); err == nil {
		got, ok := pinnedTarget(l, pin, iface.Index)
		if ok && (mode == ModeAuto || mode == got) {
			err := l.Update(o.Steadydns)
			l.Close()
			if err != nil {
				return "", fmt.Errorf("updating the xdp link on %s: %w", ifname, err)
			}
			return got, nil
		}
		// The interface was recreated or the mode changed: start over.
		l.Unpin()
		l.Close()
	}

	var l link.Link
	got := mode
	switch mode {
	case ModeNative:
		l, err = attach(o, iface.Index, link.XDPDriverMode)
	case ModeGeneric:
		l, err = attach(o, iface.Index, link.XDPGenericMode)
	default:
		got = ModeNative
		l, err = attach(o, iface.Index, link.XDPDriverMode)
		if err != nil {
			slog.Warn("native xdp unavailable, using generic mode", "interface", ifname, "error", err)
			got = ModeGeneric
			l, err = attach(o, iface.Index, link.XDPGenericMode)
		}
	}
	if err != nil {
		return "", fmt.Errorf("attaching xdp to %s: %w", ifname, err)
	}
	defer l.Close()
	if err := os.WriteFile(pin+".mode", []byte(got), 0o600); err != nil {
		return "", fmt.Errorf("recording the xdp mode of %s: %w", ifname, err)
	}
	if err := l.Pin(pin); err != nil {
		return "", fmt.Errorf("pinning the xdp link of %s: %w", ifname, err)
	}
	return got, nil
}

func attach(o *Objects, ifindex int, flags link.XDPAttachFlags) (link.Link, error) {
	return link.AttachXDP(link.XDPOptions{Program: o.Steadydns, Interface: ifindex, Flags: flags})
}

// Detach removes the program from the interface and its pinned link.
func (o *Objects) Detach(ifname string) error {
	pin := o.linkPin(ifname)
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("detaching xdp from %s: %w", ifname, err)
	}
	defer l.Close()
	os.Remove(pin + ".mode")
	if err := l.Unpin(); err != nil {
		return fmt.Errorf("unpinning the xdp link of %s: %w", ifname, err)
	}
	return nil
}

func (o *Objects) linkPin(ifname string) string {
	return filepath.Join(o.Dir, "link_"+ifname)
}

// pinnedTarget reports the mode of a pinned link if it is still attached to
// ifindex. The kernel does not report an XDP link's mode, so Attach records
// it beside the pin.
func pinnedTarget(l link.Link, pin string, ifindex int) (Mode, bool) {
	info, err := l.Info()
	if err != nil {
		return "", false
	}
	xdp := info.XDP()
	if xdp == nil || int(xdp.Ifindex) != ifindex {
		return "", false
	}
	b, err := os.ReadFile(pin + ".mode")
	if err != nil {
		return "", false
	}
	return Mode(b), true
}
