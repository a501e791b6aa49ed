package dnsbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// server is one server under test. start brings it up on the edge host and
// returns once it answers; stop takes it down and removes what it attached.
type server struct {
	name  string
	about string
	start func(ctx context.Context, r *rig) (stop func() error, err error)
	// sockets: the server answers from UDP sockets, and kxdpgun offers it
	// Options.SocketRate instead of Options.Rate.
	sockets bool
	// signed: the zone is signed online and every query asks DO=1, so
	// that the answers carry their RRSIGs.
	signed bool
	// pairDO0: each round's load run is paired, on the same process and
	// program, with one of the same queries asking DO=0 with EDNS, so
	// DO=1's cost reads against answers that differ only in signatures.
	pairDO0 bool
	// dot: the server answers DNS over TLS on dotPort.
	dot bool
}

// servers are every server the harness knows, in report order. The
// reflector comes first: the others' ratios are to it.
var servers = []server{
	{"reflector", "bare XDP reflector: swaps addresses and ports, sets QR (the ceiling)", startReflector, false, false, false, false},
	{"steadydns", "steadydns serve, XDP in native mode", startSteadydns(true), false, false, false, false},
	{"steadydns-fallback", "steadydns serve with XDP off: the miekg/dns fallback alone", startSteadydns(false), true, false, false, true},
	{"knot", "Knot DNS, UDP sockets, 1 UDP worker", startKnot(false), true, false, false, false},
	{"knot-xdp", "Knot DNS in XDP mode (AF_XDP, 1 queue)", startKnot(true), false, false, false, false},
	{"nsd", "NSD, 1 server process, no RRL, minimal responses", startNSD, true, false, false, true},
	{"gdnsd", "gdnsd, 1 UDP thread", startGdnsd, true, false, false, false},
	{"steadydns-signed", "steadydns serve, XDP in native mode, the zone signed online (ECDSA P-256), DO=1", startSteadydnsSigned, false, true, true, false},
	{"knot-signed", "Knot DNS, UDP sockets, 1 UDP worker, mod-onlinesign (ECDSA P-256), DO=1", startKnotSigned(false), true, true, false, false},
	{"knot-xdp-signed", "Knot DNS in XDP mode (AF_XDP, 1 queue), mod-onlinesign (ECDSA P-256), DO=1", startKnotSigned(true), false, true, false, false},
}

// ServerNames are the names --servers accepts.
func ServerNames() []string {
	var names []string
	for _, s := range servers {
		names = append(names, s.name)
	}
	return names
}

func serverNamed(name string) server {
	for _, s := range servers {
		if s.name == name {
			return s
		}
	}
	panic("bench: unknown server " + name) // Options.check rejects these
}

// proc is a server process on the server CPU in the edge namespace.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProc starts a server and waits until it answers.
func (r *rig) startProc(ctx context.Context, name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(r.dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, fmt.Errorf("creating the log of %s: %w", name, err)
	}
	defer f.Close()
	cmd := r.command(ctx, r.env.Edge, r.o.ServerCPU, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p.cmd = cmd
	go func() { p.err = cmd.Wait(); close(p.done) }()
	if err := r.waitReady(p); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// stop asks the server to exit and kills it if it does not within 10s.
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// waitReady polls the server with a query until it answers, or it exits.
func (r *rig) waitReady(p *proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := r.answers()
		if ok {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v; log %s:\n%s", p.name, p.err, p.log, tail(p.log))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer (%v); log %s:\n%s", p.name, err, p.log, tail(p.log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail is the end of a log, for errors.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	return string(b[max(0, len(b)-2000):])
}
