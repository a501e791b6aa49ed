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

// stateUsage is how `steadydns state` is called.
const stateUsage = "usage: steadydns state --config FILE --nkey-seed FILE [--id NAME] admin|external CHECK up|down|auto\n" +
	"       steadydns state ... shift REGION --duration D --reason TEXT | unshift REGION"

// stateCmd is `steadydns state`: an admin or external state change, or a
// traffic shift, sent with the operator's key to every aggregator, as an
// aggregator's API sends one.
func stateCmd(args []string) error {
	fs := flag.NewFlagSet("state", flag.ContinueOnError)
	path := fs.String("config", "", "the fleet's config file, as config push takes it")
	seed := fs.String("nkey-seed", "", "file holding an admin host's NKey seed")
	id := fs.String("id", "", "the admin host's id (default the host whose key the seed is)")
	dur := fs.Duration("duration", 0, "how long a shift lasts, such as 30m")
	reason := fs.String("reason", "", "why a region is shifted away: shown in the events and in status")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	// A shift's flags may follow its region.
	if len(rest) >= 2 && (rest[0] == "shift" || rest[0] == "unshift") {
		if err := fs.Parse(rest[2:]); err != nil {
			return err
		}
		rest = append([]string{rest[0], rest[1]}, fs.Args()...)
	}
	if *path == "" || *seed == "" {
		return errors.New(stateUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	who := daemon.Identity{ID: *id, NKeySeed: *seed}
	switch {
	case len(rest) == 2 && rest[0] == "shift":
		if *dur == 0 {
			return errors.New("shift: --duration is required, such as --duration 30m")
		}
		if err := daemon.SendShift(ctx, *path, who, rest[1], *dur, *reason); err != nil {
			return err
		}
		fmt.Printf("%s shifted away for %s: sent to every aggregator\n", rest[1], *dur)
		return nil
	case len(rest) == 2 && rest[0] == "unshift":
		if err := daemon.SendShift(ctx, *path, who, rest[1], 0, ""); err != nil {
			return err
		}
		fmt.Printf("%s unshifted: sent to every aggregator\n", rest[1])
		return nil
	case len(rest) != 3:
		return errors.New(stateUsage)
	}
	if err := daemon.SendState(ctx, *path, who, rest[0], rest[1], rest[2]); err != nil {
		return err
	}
	fmt.Printf("%s %s %s: sent to every aggregator\n", rest[1], rest[0], rest[2])
	return nil
}
