package testenv

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"github.com/vishvananda/netns"
)

// Options configures New.
type Options struct {
	Prefix   string // namespace and link name prefix, default "sd"; at most 11 characters. Unique prefixes let tests run in parallel.
	Backends int    // number of backend hosts, 0 to MaxBackends
}

// Env is a client, an edge that runs the server, and backends behind a bridge
// on the edge.
type Env struct {
	Client   *Host
	Edge     *Host
	Backends []*Host // Backends[i-1] is backend i

	EdgeBackendLink              string     // the bridge in the edge namespace that backends attach to
	EdgeBackendV4, EdgeBackendV6 netip.Addr // the edge's addresses on that bridge

	prefix string
	mu     sync.Mutex
	closed bool
}

// New builds the topology and returns once every link carries traffic. If it
// fails halfway it removes what it made. Call Close when done.
func New(opts Options) (*Env, error) {
	if opts.Prefix == "" {
		opts.Prefix = "sd"
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	if opts.Backends < 0 || opts.Backends > MaxBackends {
		return nil, fmt.Errorf("backends %d: want 0 to %d", opts.Backends, MaxBackends)
	}
	p := opts.Prefix
	e := &Env{
		EdgeBackendLink: bridgeLink(p),
		EdgeBackendV4:   bridgeV4,
		EdgeBackendV6:   bridgeV6,
		prefix:          p,
	}
	e.Client = newHost(clientNS(p), "client", clientLink(p), edgeLink(p), clientMAC, clientV4, clientV6)
	e.Edge = newHost(edgeNS(p), "edge", edgeLink(p), clientLink(p), edgeMAC, edgeV4, edgeV6)
	for i := 1; i <= opts.Backends; i++ {
		b := newHost(backendNS(p, i), "b"+strconv.Itoa(i), backendLink(p, i), portLink(p, i), backendMAC(i), backendV4(i), backendV6(i))
		e.Backends = append(e.Backends, b)
	}
	if err := e.build(); err != nil {
		return nil, errors.Join(fmt.Errorf("building testenv %s: %w", p, err), e.Close())
	}
	return e, nil
}

func newHost(name, role, link, peer string, mac []byte, v4, v6 netip.Addr) *Host {
	return &Host{Name: name, Role: role, Link: link, Peer: peer, MAC: mac, V4: v4, V6: v6, ns: netns.None()}
}

// Hosts lists the client, the edge and the backends, in that order.
func (e *Env) Hosts() []*Host {
	return append([]*Host{e.Client, e.Edge}, e.Backends...)
}

// Prefix is the name prefix the environment was built with.
func (e *Env) Prefix() string { return e.prefix }

func (e *Env) build() error {
	for _, h := range e.Hosts() {
		if err := h.open(); err != nil {
			return err
		}
	}
	c, edge := e.Client, e.Edge
	if err := addVeth(c, c.Link, c.MAC, edge, edge.Link, edge.MAC); err != nil {
		return err
	}
	if err := addBridge(edge, e.EdgeBackendLink, bridgeMAC); err != nil {
		return err
	}
	for i, b := range e.Backends {
		if err := addVeth(b, b.Link, b.MAC, edge, b.Peer, portMAC(i+1)); err != nil {
			return err
		}
		if err := enslave(edge, b.Peer, e.EdgeBackendLink); err != nil {
			return err
		}
		if err := configure(edge, b.Peer); err != nil {
			return err
		}
	}
	if err := e.address(); err != nil {
		return err
	}
	return e.wait()
}

// address gives every link its addresses and permanent neighbour entries.
func (e *Env) address() error {
	c, edge := e.Client, e.Edge
	c.neigh = []neighbour{{c.Link, edge.V4, edge.MAC}, {c.Link, edge.V6, edge.MAC}}
	edge.neigh = []neighbour{{edge.Link, c.V4, c.MAC}, {edge.Link, c.V6, c.MAC}}
	for _, b := range e.Backends {
		edge.neigh = append(edge.neigh, neighbour{e.EdgeBackendLink, b.V4, b.MAC}, neighbour{e.EdgeBackendLink, b.V6, b.MAC})
		b.neigh = []neighbour{{b.Link, e.EdgeBackendV4, bridgeMAC}, {b.Link, e.EdgeBackendV6, bridgeMAC}}
	}
	if err := configure(edge, e.EdgeBackendLink,
		netip.PrefixFrom(e.EdgeBackendV4, v4Bits), netip.PrefixFrom(e.EdgeBackendV6, v6Bits)); err != nil {
		return err
	}
	for _, h := range e.Hosts() {
		if err := configure(h, h.Link, netip.PrefixFrom(h.V4, v4Bits), netip.PrefixFrom(h.V6, v6Bits)); err != nil {
			return err
		}
		if err := h.setNeighbours(); err != nil {
			return err
		}
	}
	return nil
}

// wait returns once every link carries traffic. A bridge without ports has
// no carrier, so it only counts when there are backends.
func (e *Env) wait() error {
	for _, h := range e.Hosts() {
		if err := h.waitUp(h.Link); err != nil {
			return err
		}
	}
	if len(e.Backends) == 0 {
		return nil
	}
	for _, b := range e.Backends {
		if err := e.Edge.waitUp(b.Peer); err != nil {
			return err
		}
	}
	return e.Edge.waitUp(e.EdgeBackendLink)
}

// Close detaches the client's XDP program and removes every link and
// namespace the environment made. It is safe to call more than once and on
// an environment that New gave up on halfway.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	errs := []error{e.detachPass()}
	hosts := e.Hosts()
	for i := len(hosts) - 1; i >= 0; i-- {
		if hosts[i] != nil {
			errs = append(errs, hosts[i].close())
		}
	}
	return errors.Join(errs...)
}
