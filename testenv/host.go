package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Host is one namespace of the topology.
type Host struct {
	Name   string           // namespace name; the namespace file is /var/run/netns/<Name>
	Role   string           // what its topology calls it: client, edge, b1; in a fleet client, e1, a1, p1a, b1
	Link   string           // the host's main link: toward the edge (in a fleet, the switch), or for the edge toward the client
	Peer   string           // the far end of Link, in the neighbouring namespace (in a fleet, the host's port on the switch)
	MAC    net.HardwareAddr // Link's MAC address, fixed so load generators can be told it
	V4, V6 netip.Addr       // the host's addresses on Link

	ns      netns.NsHandle
	nl      *netlink.Handle // bound to ns, so link changes never need a thread switch
	created bool            // whether we made the namespace, and so may delete it
	neigh   []neighbour
}

// neighbour is a permanent neighbour entry. An admin down flushes even
// permanent entries from a link, so SetLink(true) writes them again.
type neighbour struct {
	link string
	ip   netip.Addr
	mac  net.HardwareAddr
}

// NSPath is the namespace file, for nsenter --net= and setns(2).
func (h *Host) NSPath() string { return nsPath(h.Name) }

// Do runs fn on a locked OS thread switched into h's network namespace.
// Sockets created inside fn stay in that namespace after Do returns, but
// goroutines started by fn run elsewhere, in whatever namespace their thread
// is in.
func (h *Host) Do(fn func() error) error {
	if h.ns == netns.None() {
		return fmt.Errorf("entering %s: host is closed", h.Name)
	}
	err := inNS(h.ns, fn)
	if err != nil {
		return fmt.Errorf("in %s: %w", h.Name, err)
	}
	return nil
}

// Command runs a program in h's network namespace only. It uses nsenter
// rather than `ip netns exec`, which also remounts /sys and so hides the bpffs
// mounted at /sys/fs/bpf.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + h.NSPath(), "--", name}, args...)...)
}

// SetLink brings the host's main link up or down, to simulate the host going
// away and coming back. Up returns once the link carries traffic again.
func (h *Host) SetLink(up bool) error {
	l, err := h.nl.LinkByName(h.Link)
	if err != nil {
		return fmt.Errorf("finding %s in %s: %w", h.Link, h.Name, err)
	}
	if !up {
		if err := h.nl.LinkSetDown(l); err != nil {
			return fmt.Errorf("setting %s down: %w", h.Link, err)
		}
		return nil
	}
	if err := h.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("setting %s up: %w", h.Link, err)
	}
	if err := h.setNeighbours(); err != nil {
		return err
	}
	return h.waitUp(h.Link)
}

// open creates the namespace and prepares it: sysctls first, so that links
// created later inherit them, then lo.
func (h *Host) open() error {
	ns, err := createNS(h.Name)
	if err != nil {
		return fmt.Errorf("creating netns %s: %w", h.Name, err)
	}
	h.ns, h.created = ns, true
	if h.nl, err = netlink.NewHandleAt(ns); err != nil {
		return fmt.Errorf("opening netlink in %s: %w", h.Name, err)
	}
	if err := h.Do(setSysctls); err != nil {
		return err
	}
	lo, err := h.nl.LinkByName("lo")
	if err == nil {
		err = h.nl.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("setting lo up in %s: %w", h.Name, err)
	}
	return nil
}

// close removes the host's links and namespace. Deleting the links here,
// rather than leaving it to the kernel's deferred namespace cleanup, means
// they are gone when Close returns, even if a process still holds the
// namespace. It copes with every stage of a half-finished open.
func (h *Host) close() error {
	var errs []error
	if h.nl != nil {
		errs = append(errs, flushLinks(h.nl))
	}
	h.release()
	if h.created {
		errs = append(errs, deleteNS(h.Name))
		h.created = false
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing %s: %w", h.Name, err)
	}
	return nil
}

// release closes h's handles and leaves its namespace and links standing,
// for hosts this process found rather than made.
func (h *Host) release() {
	if h.nl != nil {
		h.nl.Close()
		h.nl = nil
	}
	if h.ns != netns.None() {
		h.ns.Close()
		h.ns = netns.None()
	}
}

// HTTPClient returns a client whose connections are dialled inside h's
// namespace, for talking to an API that listens there.
func (h *Host) HTTPClient() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var c net.Conn
				err := h.Do(func() error {
					var err error
					c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
			DisableKeepAlives: true,
		},
	}
}
