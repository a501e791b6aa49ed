package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
)

func configFlag(name string, args []string) (string, *flag.FlagSet, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML)")
	if err := fs.Parse(args); err != nil {
		return "", fs, err
	}
	if *path == "" {
		return "", fs, errors.New("--config is required")
	}
	return *path, fs, nil
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML)")
	roles := fs.String("role", "", "roles to play, comma-separated: prober, aggregator, edge (default all)")
	id := fs.String("id", "", "this host's id in the fleet (default the host name)")
	region := fs.String("region", "", "this prober's region, shown with its votes")
	cell := fs.String("cell", "", "the cell this prober or aggregator belongs to (default the first of cluster.cells)")
	seed := fs.String("nkey-seed", "", "file holding this host's NKey seed, its identity on NATS")
	reset := fs.Bool("reset-state", false, "start without a state file that cannot be used (moved aside), from the pinned health table if any, rather than refusing to start")
	var logs logFlags
	fs.StringVar(&logs.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&logs.level, "log-level", "info", "least level logged: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setupLogging(os.Stderr, logs); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("--config is required")
	}
	ident := daemon.Identity{ID: *id, Region: *region, Cell: *cell, NKeySeed: *seed}
	if *roles != "" {
		rs, err := config.ParseRoles(*roles)
		if err != nil {
			return fmt.Errorf("--role: %w", err)
		}
		ident.Roles = rs
	}
	// One P more than the CPUs: the fallback runs a UDP loop per CPU for
	// one listen address, each holding its P while it waits in the kernel,
	// and raises GOMAXPROCS once they run so the rest of the daemon (the
	// API, the health checks and pushes, timers, the collector) keeps a P
	// per CPU (controlplane/fallback). The health aggregation runs on
	// threads of lower priority (daemon.background), so the kernel lets
	// the fallback's threads go first.
	runtime.GOMAXPROCS(runtime.NumCPU() + 1)
	d, err := daemon.StartWith(*path, daemon.Options{Identity: ident, ResetState: *reset})
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML)")
	skipHost := fs.Bool("skip-host", false, "validate the file alone, not against this host's interfaces, as on a CI machine")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("--config is required")
	}
	checkFn := daemon.CheckOnHost
	if *skipHost {
		checkFn = daemon.Check
	}
	warnings, err := checkFn(*path)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	fmt.Printf("%s: ok\n", *path)
	return nil
}

func detach(args []string) error {
	path, _, err := configFlag("detach", args)
	if err != nil {
		return err
	}
	return daemon.Detach(path)
}
