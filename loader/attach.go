package loader

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Mode is how XDP is attached.
type Mode string

const (
	ModeAuto    Mode = "auto"    // native, falling back to generic with a warning
	ModeNative  Mode = "native"  // driver mode only
	ModeGeneric Mode = "generic" // skb mode only
)

var pinnedModes = []Mode{ModeNative, ModeGeneric}

// Attach attaches the program to the interface through a pinned bpf_link.
// A link already pinned for the interface by an earlier run is updated in
// place, so queries keep being answered across a restart. It returns the
// mode the program runs in.
func (o *Objects) Attach(ifname string, mode Mode) (Mode, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return "", fmt.Errorf("attaching xdp to %s: %w", ifname, err)
	}
	for _, m := range pinnedModes {
		for _, pin := range o.linkPins(ifname, m) {
			l, err := link.LoadPinnedLink(pin, nil)
			if err != nil {
				continue
			}
			if attachedTo(l, iface.Index) && (mode == ModeAuto || mode == m) {
				err := l.Update(o.Steadydns)
				if err == nil && pin != o.linkPin(ifname, m) {
					err = l.Pin(o.linkPin(ifname, m)) // moves the pin
				}
				l.Close()
				if err != nil {
					return "", fmt.Errorf("updating the xdp link on %s: %w", ifname, err)
				}
				return m, nil
			}
			// The interface was recreated or the mode changed: start over.
			l.Unpin()
			l.Close()
		}
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
		// Generic mode would meet the same program, or lack the same
		// privilege: falling back would only add a misleading warning.
		if err != nil && !occupied(err) && !errors.Is(err, unix.EPERM) {
			slog.Warn("native xdp unavailable, using generic mode", "interface", ifname, "error", err)
			got = ModeGeneric
			l, err = attach(o, iface.Index, link.XDPGenericMode)
		}
	}
	if occupied(err) {
		return "", fmt.Errorf("attaching xdp to %s: another xdp program is attached (bpftool net show dev %s) by a link no pin under %s holds: "+
			"another steadydns with other pins, as when one runs under ip netns exec (a bpf file system of its own) or with another server.bpffs; "+
			"run both with the same pins (nsenter --net= rather than ip netns exec) or detach the other first: %w",
			ifname, ifname, o.Base, err)
	}
	if err != nil {
		return "", fmt.Errorf("attaching xdp to %s: %w", ifname, permissionError(err, capNetAdm))
	}
	defer l.Close()
	if err := l.Pin(o.linkPin(ifname, got)); err != nil {
		return "", fmt.Errorf("pinning the xdp link of %s: %w", ifname, err)
	}
	return got, nil
}

func attach(o *Objects, ifindex int, flags link.XDPAttachFlags) (link.Link, error) {
	return link.AttachXDP(link.XDPOptions{Program: o.Steadydns, Interface: ifindex, Flags: flags})
}

// SwapProgram puts prog (a LoadProgram) on the link Attach pinned for
// ifname, in place of the program running there; Attach puts o's back.
func (o *Objects) SwapProgram(ifname string, prog *ebpf.Program) error {
	for _, m := range pinnedModes {
		l, err := link.LoadPinnedLink(o.linkPin(ifname, m), nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("swapping the xdp program on %s: %w", ifname, err)
		}
		err = l.Update(prog)
		l.Close()
		if err != nil {
			return fmt.Errorf("swapping the xdp program on %s: %w", ifname, err)
		}
		return nil
	}
	return fmt.Errorf("swapping the xdp program on %s: no link pinned under %s", ifname, o.Base)
}

// Linked reports whether a link pinned by this or an earlier run attaches
// XDP to the interface.
func (o *Objects) Linked(ifname string) bool {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return false
	}
	return o.LinkedTo(ifname, iface.Index)
}

// LinkedTo is Linked for the interface of that index, which a caller
// outside the interface's network namespace looked up while inside it.
func (o *Objects) LinkedTo(ifname string, ifindex int) bool {
	for _, m := range pinnedModes {
		for _, pin := range o.linkPins(ifname, m) {
			l, err := link.LoadPinnedLink(pin, nil)
			if err != nil {
				continue
			}
			ok := attachedTo(l, ifindex)
			l.Close()
			if ok {
				return true
			}
		}
	}
	return false
}

// Detach removes the program from the interface and its pinned link,
// whichever build pinned it.
func (o *Objects) Detach(ifname string) error {
	for _, m := range pinnedModes {
		for _, pin := range o.linkPins(ifname, m) {
			l, err := link.LoadPinnedLink(pin, nil)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("detaching xdp from %s: %w", ifname, err)
			}
			err = l.Unpin()
			l.Close()
			if err != nil {
				return fmt.Errorf("unpinning the xdp link of %s: %w", ifname, err)
			}
		}
	}
	return nil
}

// occupied reports whether an attach failed because another XDP program
// holds the interface: EBUSY for a link in the same mode, EEXIST for a
// program in the other mode or attached without a link.
func occupied(err error) bool { return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) }

// linkPin names the pin after the interface and the mode: the kernel does
// not report an XDP link's mode, and bpffs holds no other files to keep it.
func (o *Objects) linkPin(ifname string, m Mode) string {
	return filepath.Join(o.Base, "link_"+ifname+"_"+string(m))
}

// linkPins are where a link for ifname and m may be pinned: Base, and the
// layout directories, where builds before links moved up pinned them.
func (o *Objects) linkPins(ifname string, m Mode) []string {
	old, _ := filepath.Glob(filepath.Join(o.Base, "v*", "link_"+ifname+"_"+string(m))) // the pattern is valid
	return append([]string{o.linkPin(ifname, m)}, old...)
}

// attachedTo reports whether a pinned link is still attached to ifindex.
func attachedTo(l link.Link, ifindex int) bool {
	info, err := l.Info()
	if err != nil {
		return false
	}
	xdp := info.XDP()
	return xdp != nil && int(xdp.Ifindex) == ifindex
}
