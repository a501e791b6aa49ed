package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/transport"
)

// ConnectAdmin connects to the fleet's NATS servers as an admin host: the
// host whose key is in the seed file, or id.ID when given, which must hold
// the admin role in cluster.nats.hosts.
func ConnectAdmin(ctx context.Context, cfg *config.Config, id Identity) (*transport.Conn, error) {
	n := cfg.Cluster.NATS
	if n == nil {
		return nil, cfg.Errorf("cluster", "an admin needs cluster.nats to say where the servers are")
	}
	if id.NKeySeed == "" {
		return nil, errors.New("--nkey-seed is required: the seed of an admin host's key")
	}
	h, err := listedHost(cfg, &id)
	if err != nil {
		return nil, err
	}
	if !h.Has(config.RoleAdmin) {
		return nil, cfg.Errorf("cluster.nats.hosts."+id.ID+".roles", "host %s is not an admin", id.ID)
	}
	// An admin publishes no frames or tables: any cell names the connection.
	conn, err := transport.Connect(transport.Options{URLs: n.URLs, ID: id.ID, Cell: cfg.Cluster.Cells[0].Name,
		Roles: []transport.Role{transport.RoleAdmin}, NKeySeedFile: id.NKeySeed, TLS: natsTLS(n)})
	if err != nil {
		return nil, err
	}
	if err := conn.WaitConnected(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// SendState sends an admin (up, down, auto) or external (up, down) state
// change of check to every aggregator, with the admin key of id, under the
// fleet config at path: the operator's way to change state without an
// aggregator's API.
func SendState(ctx context.Context, path string, id Identity, kind, check, value string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	var k transport.StateKind
	var v uint8
	switch kind {
	case "admin":
		i := slices.Index(adminValues, value)
		if i < 0 {
			return fmt.Errorf("sending admin state of %s: %q is not auto, up or down", check, value)
		}
		k, v = transport.StateAdmin, uint8(i)
	case "external":
		if value != "up" && value != "down" {
			return fmt.Errorf("sending external state of %s: %q is not up or down", check, value)
		}
		k = transport.StateExternal
		if value == "up" {
			v = 1
		}
	default:
		return fmt.Errorf("sending state: %q is not admin or external", kind)
	}
	if i, ok := cfg.Checks.Find(check); !ok {
		return fmt.Errorf("sending the state of %s: %w", check, health.ErrUnknownCheck)
	} else if k == transport.StateExternal && cfg.Checks.Type(i) != config.CheckExternal {
		return fmt.Errorf("sending external state of %s: it is a %s check", check, cfg.Checks.Type(i))
	}
	return sendState(ctx, cfg, id, transport.StateChange{Kind: k, Value: v, Check: check})
}

// sendState publishes s to every aggregator with the admin key of id.
func sendState(ctx context.Context, cfg *config.Config, id Identity, s transport.StateChange) error {
	check := s.Check
	b, err := s.Encode()
	if err != nil {
		return err
	}
	conn, err := ConnectAdmin(ctx, cfg, id)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The hash the hosts serve under folds in the table's layout.
	p, err := build(cfg, nil, false)
	if err != nil {
		return err
	}
	slot := uint64(time.Now().UnixNano() / int64(cfg.Aggregation.PushInterval))
	if err := conn.Publish(transport.KindState, slot, p.Config.Hash, b); err != nil {
		return fmt.Errorf("sending the state of %s: %w", check, err)
	}
	if err := conn.Flush(ctx); err != nil {
		return fmt.Errorf("sending the state of %s: %w", check, err)
	}
	if conn.Counters().PermissionErrors > 0 {
		return fmt.Errorf("sending the state of %s: the servers refused it", check)
	}
	return nil
}
