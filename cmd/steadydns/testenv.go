package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/testenv"
)

const testenvUsage = `usage: steadydns testenv up [--prefix P] [--backends N]
       steadydns testenv up --fleet [--prefix P] [--regions N] [--probers-per-region N] [--edges N] [--aggregators N] [--backends N]
       steadydns testenv partition [--prefix P] A B
       steadydns testenv heal [--prefix P] [A B]
       steadydns testenv down [--prefix P]
       steadydns testenv backend --listen ADDR [--fail P]
A and B name fleet hosts (client, e1, a1, p1a, b1) or a region's probers (r1).`

func testenvCmd(args []string) error {
	if len(args) == 0 {
		return errors.New(testenvUsage)
	}
	switch args[0] {
	case "backend":
		return backend(args[1:])
	case "up":
		return testenvUp(args[1:])
	case "down", "partition", "heal":
		fs := flag.NewFlagSet("testenv "+args[0], flag.ContinueOnError)
		prefix := fs.String("prefix", "sd", "namespace and link name prefix")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if args[0] == "down" {
			if fs.NArg() != 0 {
				return errors.New(testenvUsage)
			}
			return testenv.Down(*prefix)
		}
		return testenvCut(*prefix, args[0] == "partition", fs.Args())
	}
	return errors.New(testenvUsage)
}

func testenvUp(args []string) error {
	fs := flag.NewFlagSet("testenv up", flag.ContinueOnError)
	prefix := fs.String("prefix", "sd", "namespace and link name prefix")
	backends := fs.Int("backends", 2, "backend hosts")
	fleet := fs.Bool("fleet", false, "build the fleet: client, edges, aggregators, probers in regions and backends on one switch")
	var fo testenv.FleetOptions
	fs.IntVar(&fo.Regions, "regions", 3, "prober regions (with --fleet)")
	fs.IntVar(&fo.ProbersPerRegion, "probers-per-region", 2, "probers in each region (with --fleet)")
	fs.IntVar(&fo.Edges, "edges", 2, "DNS edges (with --fleet)")
	fs.IntVar(&fo.Aggregators, "aggregators", 2, "aggregators (with --fleet)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New(testenvUsage)
	}
	// Native XDP on an edge's veth needs a program on the veth's peer for
	// XDP_TX replies to arrive: the client's veth, or the edges' switch ports.
	var pass bpf.PassObjects
	if err := bpf.LoadPassObjects(&pass, nil); err != nil {
		return fmt.Errorf("loading the xdp pass program: %w", err)
	}
	defer pass.Close()
	if !*fleet {
		var fleetOnly []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "regions", "probers-per-region", "edges", "aggregators":
				fleetOnly = append(fleetOnly, "--"+f.Name)
			}
		})
		if len(fleetOnly) > 0 {
			return fmt.Errorf("%s: only with --fleet", strings.Join(fleetOnly, ", "))
		}
		return upSingle(*prefix, *backends, pass.XdpPass)
	}
	fo.Prefix, fo.Backends = *prefix, *backends
	f, err := testenv.NewFleet(fo)
	if err != nil {
		return err
	}
	// The namespaces outlive this process; `testenv down` removes them.
	if err := f.AttachPass(pass.XdpPass); err != nil {
		return err
	}
	for _, h := range f.Hosts() {
		fmt.Printf("%-7s %-14s %-13s %-15s %s\n", h.Role, h.Name, h.Link, h.V4, h.V6)
	}
	return nil
}

func upSingle(prefix string, backends int, pass *ebpf.Program) error {
	env, err := testenv.Up(testenv.Options{Prefix: prefix, Backends: backends})
	if err != nil {
		return err
	}
	if err := env.AttachPass(pass); err != nil {
		return err
	}
	for _, h := range env.Hosts() {
		fmt.Printf("%-12s %-8s %-15s %s\n", h.Name, h.Link, h.V4, h.V6)
	}
	return nil
}

// testenvCut partitions or heals hosts of the fleet that `up --fleet` left.
// Heal without names heals every pair.
func testenvCut(prefix string, cut bool, names []string) error {
	if len(names) != 2 && (cut || len(names) != 0) {
		return errors.New(testenvUsage)
	}
	f, err := testenv.OpenFleet(prefix)
	if err != nil {
		return err
	}
	defer f.Close()
	if len(names) == 0 {
		return f.HealAll()
	}
	as, err := f.Lookup(names[0])
	if err != nil {
		return err
	}
	bs, err := f.Lookup(names[1])
	if err != nil {
		return err
	}
	if cut {
		return f.PartitionGroups(as, bs)
	}
	return f.HealGroups(as, bs)
}

// backend serves a health endpoint, for the demo's backends: GET /healthz
// answers 200 "ok", or, with --fail P, 500 "failing" with probability P
// drawn afresh for every request, so that every probe of every checker
// fails on its own (a flapping backend). It runs until killed.
func backend(args []string) error {
	fs := flag.NewFlagSet("testenv backend", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to serve HTTP on, such as 198.18.1.1:80")
	fail := fs.Float64("fail", 0, "probability, 0 to 1, that a request gets 500")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("--listen is required")
	}
	if *fail < 0 || *fail > 1 {
		return fmt.Errorf("--fail %v: want 0 to 1", *fail)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if rand.Float64() < *fail {
			http.Error(w, "failing", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		return fmt.Errorf("serving on %s: %w", *listen, err)
	}
	return nil
}
