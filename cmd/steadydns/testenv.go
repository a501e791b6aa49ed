package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/testenv"
)

func testenvCmd(args []string) error {
	if len(args) > 0 && args[0] == "backend" {
		return backend(args[1:])
	}
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		return errors.New("usage: steadydns testenv up|down [--prefix P] [--backends N] | backend --listen ADDR")
	}
	fs := flag.NewFlagSet("testenv", flag.ContinueOnError)
	prefix := fs.String("prefix", "sd", "namespace and link name prefix")
	backends := fs.Int("backends", 2, "backend hosts (up only)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "down" {
		return testenv.Down(*prefix)
	}
	env, err := testenv.Up(testenv.Options{Prefix: *prefix, Backends: *backends})
	if err != nil {
		return err
	}
	// Native XDP on the edge's veth needs a program on the client's peer
	// for XDP_TX replies to arrive.
	var pass bpf.PassObjects
	if err := bpf.LoadPassObjects(&pass, nil); err != nil {
		return fmt.Errorf("loading the xdp pass program: %w", err)
	}
	defer pass.Close()
	if err := env.AttachPass(pass.XdpPass); err != nil {
		return err
	}
	for _, h := range env.Hosts() {
		fmt.Printf("%-12s %-8s %-15s %s\n", h.Name, h.Link, h.V4, h.V6)
	}
	return nil
}

// backend serves a health endpoint, for the demo's backends: GET /healthz
// answers 200 "ok". It runs until killed.
func backend(args []string) error {
	fs := flag.NewFlagSet("testenv backend", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to serve HTTP on, such as 198.18.1.1:80")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("--listen is required")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		return fmt.Errorf("serving on %s: %w", *listen, err)
	}
	return nil
}
