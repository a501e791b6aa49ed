package dnsbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// The peers get configs equivalent to steadydns's: the same zone file, the
// server address, one worker, no logging per query, no zone transfers, and
// what each one's documentation advises for one core (README.md names
// the settings and their sources).

const knotConfig = `server:
    rundir: %[1]s
    listen: %[2]s@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: notice
database:
    storage: %[1]s
template:
  - id: default
    storage: %[1]s
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: %[3]s
    file: %[4]s
`

// knotXDP makes Knot answer UDP on port 53 of the interface through
// AF_XDP; its sockets stay for everything else.
const knotXDP = `xdp:
    listen: %s@53
    udp: on
    tcp: off
`

// knotOnlineSign signs the zone as steadydns does: one combined ECDSA
// P-256 key, made by Knot in its key database on the first load, and
// every answer signed as it is sent (mod-onlinesign, Knot's only online
// signing). A policy is referred to by id, so it goes before the zone.
const knotOnlineSign = `policy:
  - id: bench
    algorithm: ecdsap256sha256
    single-type-signing: on
mod-onlinesign:
  - id: bench
    policy: bench
`

func startKnot(xdp bool) func(context.Context, *rig) (func() error, error) {
	return knotServer(xdp, false)
}

func startKnotSigned(xdp bool) func(context.Context, *rig) (func() error, error) {
	return knotServer(xdp, true)
}

func knotServer(xdp, signed bool) func(context.Context, *rig) (func() error, error) {
	return func(ctx context.Context, r *rig) (func() error, error) {
		name := "knot"
		if xdp {
			name = "knot-xdp"
		}
		if signed {
			name += "-signed"
		}
		dir, err := serverDir(r, name)
		if err != nil {
			return nil, err
		}
		cfg := fmt.Sprintf(knotConfig, dir, r.env.Edge.V4, strings.TrimSuffix(origin, "."), r.zone.file)
		if signed {
			cfg = strings.Replace(cfg, "zone:\n", knotOnlineSign+"zone:\n", 1) + "    module: mod-onlinesign/bench\n"
		}
		if xdp {
			cfg += fmt.Sprintf(knotXDP, r.env.Edge.Link)
		}
		path := filepath.Join(dir, "knot.conf")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		p, err := r.startProc(ctx, name, "knotd", "-c", path)
		if err != nil {
			return nil, err
		}
		return func() error {
			p.stop()
			if xdp {
				return r.detachEdgeXDP() // knotd leaves its program attached when it exits
			}
			return nil
		}, nil
	}
}

// detachEdgeXDP removes a program attached through netlink from the
// server's veth.
func (r *rig) detachEdgeXDP() error {
	err := r.env.Edge.Do(func() error {
		l, err := netlink.LinkByName(r.env.Edge.Link)
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(l, -1, nl.XDP_FLAGS_DRV_MODE)
	})
	if err != nil {
		return fmt.Errorf("detaching xdp from %s: %w", r.env.Edge.Link, err)
	}
	return nil
}

// nsdConfig: Debian builds NSD with --enable-ratelimit, and RRL is then on
// unless both rates are 0 (nsd.conf(5)); one client asking at full rate is
// what RRL exists to limit. NSD also adds the apex NS and its glue to every
// positive answer unless minimal-responses is set: 168 bytes instead of
// 106 for 4 A, where the other servers send the answer alone. reuseport
// is left off: nsd.conf(5) calls it useful only with more than one server.
// DNS over TLS is on dotPort (tls-port).
const nsdConfig = `server:
    ip-address: %[2]s
    port: 53
    server-count: 1
    username: ""
    chroot: ""
    database: ""
    zonesdir: "%[1]s"
    zonelistfile: "%[1]s/zone.list"
    xfrdfile: "%[1]s/xfrd.state"
    pidfile: "%[1]s/nsd.pid"
    hide-version: yes
    verbosity: 0
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    minimal-responses: yes
    ip-address: %[2]s@%[7]d
    tls-port: %[7]d
    tls-service-pem: %[5]s
    tls-service-key: %[6]s
remote-control:
    control-enable: no
zone:
    name: %[3]s
    zonefile: %[4]s
`

func startNSD(ctx context.Context, r *rig) (func() error, error) {
	dir, err := serverDir(r, "nsd")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "nsd.conf")
	cfg := fmt.Sprintf(nsdConfig, dir, r.env.Edge.V4, origin, r.zone.file, r.dotCert, r.dotKey, dotPort)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	p, err := r.startProc(ctx, "nsd", "nsd", "-d", "-c", path)
	if err != nil {
		return nil, err
	}
	return func() error { p.stop(); return nil }, nil
}

const gdnsdConfig = `options => {
  listen => [ %[2]s ]
  udp_threads => 1
  tcp_threads => 1
  run_dir => %[1]s/run
  state_dir => %[1]s/state
}
`

// startGdnsd runs gdnsd, which reads zones/<zone name> from its config
// directory.
func startGdnsd(ctx context.Context, r *rig) (func() error, error) {
	dir, err := serverDir(r, "gdnsd")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"run", "state", "zones"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("making gdnsd's %s directory: %w", d, err)
		}
	}
	z, err := os.ReadFile(r.zone.file)
	if err != nil {
		return nil, fmt.Errorf("reading the zone: %w", err)
	}
	zpath := filepath.Join(dir, "zones", strings.TrimSuffix(origin, "."))
	if err := os.WriteFile(zpath, z, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", zpath, err)
	}
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, fmt.Appendf(nil, gdnsdConfig, dir, r.env.Edge.V4), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	p, err := r.startProc(ctx, "gdnsd", "gdnsd", "-c", dir, "start")
	if err != nil {
		return nil, err
	}
	return func() error { p.stop(); return nil }, nil
}

// serverDir makes a fresh directory for one server's config and state,
// in place of the one of its last round.
func serverDir(r *rig, name string) (string, error) {
	dir := filepath.Join(r.dir, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("removing %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	return dir, nil
}
