package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/link"

	"github.com/steadydns/steadydns/controlplane/daemon"
)

// startReflector attaches the bare reflector to the server's veth.
func startReflector(_ context.Context, r *rig) (func() error, error) {
	prog, closeProg, err := loadReflector()
	if err != nil {
		return nil, err
	}
	var l link.Link
	err = r.env.Edge.Do(func() error {
		ifc, err := net.InterfaceByName(r.env.Edge.Link)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		closeProg()
		return nil, fmt.Errorf("attaching the reflector to %s: %w", r.env.Edge.Link, err)
	}
	return func() error { defer closeProg(); return l.Close() }, nil
}

// steadydnsConfig is the serve config of the benchmark: the generated zone,
// nothing health-checked, so every A and AAAA set is a static set in the
// record table, XDP on the server's veth or nowhere, and DNS over TLS. Rate limiting,
// on by default, is off: one client asking at full rate is what it
// limits, and the peers run without it too (nsdConfig); its cost is
// measured on its own (constwork_rrl.go).
const steadydnsConfig = `server:
  interfaces: [%s]
  xdp_mode: native
  listen: ["%s:53", "[%s]:53"]
  api: 127.0.0.1:9153
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0}
  tls:
    listen: ["%s:%d"]
    cert: %s
    key: %s
zones:
  - origin: %s
    file: %s
`

// steadydnsDNSSEC signs the zone online with one combined ECDSA P-256
// key, which serve makes in the empty directory on its first start.
const steadydnsDNSSEC = `    dnssec:
      keys: %s
      algorithm: ecdsap256sha256
`

// startSteadydns runs `steadydns serve` in the edge namespace, with XDP on
// the server's veth or with XDP off.
func startSteadydns(xdp bool) func(context.Context, *rig) (func() error, error) {
	name := "steadydns-fallback"
	if xdp {
		name = "steadydns"
	}
	return func(ctx context.Context, r *rig) (func() error, error) {
		return r.startServe(ctx, name, xdp, false)
	}
}

// startSteadydnsSigned runs it with XDP and the zone signed online, and
// returns once XDP answers every name's DO=1 queries itself: until the
// control plane has signed a set, its DO=1 queries go to the fallback.
func startSteadydnsSigned(ctx context.Context, r *rig) (func() error, error) {
	return r.startServe(ctx, "steadydns-signed", true, true)
}

func (r *rig) startServe(ctx context.Context, name string, xdp, signed bool) (func() error, error) {
	ifaces := ""
	if xdp {
		ifaces = r.env.Edge.Link
	}
	path := filepath.Join(r.dir, name+".yaml")
	cfg := fmt.Sprintf(steadydnsConfig, ifaces, r.env.Edge.V4, r.env.Edge.V6, filepath.Join(r.bpffs, name), filepath.Join(r.dir, name+"-state"),
		r.env.Edge.V4, dotPort, r.dotCert, r.dotKey, origin, r.zone.file)
	if signed {
		cfg += fmt.Sprintf(steadydnsDNSSEC, filepath.Join(r.dir, name+"-keys"))
	}
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	p, err := r.startProc(ctx, name, r.o.Binary, "serve", "--config", path)
	if err != nil {
		return nil, errors.Join(err, daemon.Detach(path))
	}
	// serve leaves XDP attached on purpose (a restart must not drop
	// answers); detach removes it and the pinned maps.
	stop := func() error { p.stop(); return daemon.Detach(path) }
	if signed {
		if err := r.waitSigned(ctx, p); err != nil {
			return nil, errors.Join(err, stop())
		}
	}
	return stop, nil
}
