package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// configCmd is `steadydns config push`: the fleet sections, validated as
// `check` validates them, go to the NATS config bucket with their zone
// files, and every host started with cluster.config: nats loads them.
func configCmd(args []string) error {
	if len(args) == 0 || args[0] != "push" {
		return errors.New("usage: steadydns config push --config FILE --nkey-seed FILE [--id NAME] [--replicas N]")
	}
	fs := flag.NewFlagSet("config push", flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML) whose fleet sections to push")
	id := fs.String("id", "", "the admin host's id (default the host whose key the seed is)")
	seed := fs.String("nkey-seed", "", "file holding an admin NKey seed")
	replicas := fs.Int("replicas", 0, "servers holding a copy of the bucket when it is created (default 3 with three or more routes, else 1)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("--config is required")
	}
	if _, err := daemon.Check(*path); err != nil {
		return err
	}
	b, cfg, err := config.NewBundle(*path)
	if err != nil {
		return err
	}
	if cfg.Cluster.NATS == nil {
		return cfg.Errorf("cluster", "config push needs cluster.nats to say where the servers are")
	}
	value, err := b.Marshal()
	if err != nil {
		return err
	}
	n := cfg.Cluster.NATS
	if *replicas == 0 {
		// A JetStream cluster needs a majority of its servers: three
		// copies survive one loss, two survive none.
		*replicas = 1
		if n.Embed != nil && len(n.Embed.Routes) >= 3 {
			*replicas = 3
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := daemon.ConnectAdmin(ctx, cfg, daemon.Identity{ID: *id, NKeySeed: *seed})
	if err != nil {
		return fmt.Errorf("pushing the config: %w", err)
	}
	defer conn.Close()
	store, err := conn.CreateConfigStore(ctx, transport.StoreOptions{Replicas: *replicas})
	if err != nil {
		return err
	}
	rev, err := store.Put(ctx, value)
	if err != nil {
		return err
	}
	fmt.Printf("%s: pushed as revision %d\n", *path, rev)
	return nil
}
