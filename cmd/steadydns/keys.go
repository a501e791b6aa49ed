package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
)

// keygen is `steadydns keygen`: a host's own NKey. The seed stays on the
// host, readable by its owner only; the public key goes into every host's
// cluster.nats.hosts, which is printed ready to paste.
func keygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	id := fs.String("id", "", "the host's id in cluster.nats.hosts")
	roles := fs.String("role", "", "the host's roles, comma-separated: prober, aggregator, edge, admin")
	cell := fs.String("cell", "", "the prober's or aggregator's cell (default the first of cluster.cells)")
	region := fs.String("region", "", "the prober's region")
	out := fs.String("out", "", "file to write the seed to (default ID.nk); never overwritten")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := config.ValidHostID(*id); err != nil {
		return fmt.Errorf("--id: %w", err)
	}
	var rs []string
	for _, r := range strings.Split(*roles, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if !slices.Contains(config.HostRoles, config.Role(r)) {
			return fmt.Errorf("--role: unknown role %q, want prober, aggregator, edge or admin", r)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return errors.New("--role is required: prober, aggregator, edge or admin")
	}
	if *out == "" {
		*out = *id + ".nk"
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return fmt.Errorf("making a key: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("making a key: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("making a key: %w", err)
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the seed: %w", err)
	}
	if _, err := f.Write(append(seed, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing the seed: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the seed: %w", err)
	}
	abs, _ := filepath.Abs(*out)
	fmt.Fprintf(os.Stderr, "seed written to %s (mode 0600): give it to host %s as --nkey-seed, and to nobody else\n", abs, *id)
	fmt.Fprintf(os.Stderr, "public key %s; add this line under cluster.nats.hosts on every host:\n", pub)
	line := fmt.Sprintf("%s: { roles: [%s], key: %s", *id, strings.Join(rs, ", "), pub)
	if *cell != "" {
		line += ", cell: " + *cell
	}
	if *region != "" {
		line += ", region: " + *region
	}
	fmt.Println(line + " }")
	return nil
}

// stateCmd is `steadydns state`: an admin or external state change sent
// with the operator's key to every aggregator, as an aggregator's API
// sends one.
func stateCmd(args []string) error {
	fs := flag.NewFlagSet("state", flag.ContinueOnError)
	path := fs.String("config", "", "the fleet's config file, as config push takes it")
	seed := fs.String("nkey-seed", "", "file holding an admin host's NKey seed")
	id := fs.String("id", "", "the admin host's id (default the host whose key the seed is)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if *path == "" || *seed == "" || len(rest) != 3 {
		return errors.New("usage: steadydns state --config FILE --nkey-seed FILE [--id NAME] admin|external CHECK up|down|auto")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := daemon.SendState(ctx, *path, daemon.Identity{ID: *id, NKeySeed: *seed}, rest[0], rest[1], rest[2]); err != nil {
		return err
	}
	fmt.Printf("%s %s %s: sent to every aggregator\n", rest[1], rest[0], rest[2])
	return nil
}
