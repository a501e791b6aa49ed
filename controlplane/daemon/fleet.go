package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
)

// fleetNode is this host's part of a fleet: its NATS connection, the
// server it embeds as an aggregator, the config bucket, and what it
// receives for the other parts.
type fleetNode struct {
	srv   *transport.Server // nil unless an aggregator embeds one
	conn  *transport.Conn
	cell  string                 // this host's cell
	store *transport.ConfigStore // nil unless the fleet sections come from the bucket
	path  string                 // this host's own config file
	plan  func() *Plan           // the plan applied
	// reload applies a config revision from the bucket, and observeReload
	// counts its outcome.
	reload        func(*config.Config) error
	observeReload func(error)

	receivers []receiver // what start subscribes to, in order

	mu       sync.Mutex
	subs     map[transport.Kind]*transport.Subscription
	revDir   string // where revisions are materialized; made on first use
	watching context.CancelFunc
	watched  chan struct{}

	revision atomic.Uint64 // config revision in use; 0 for a local file
	refused  atomic.Uint64 // config revisions that failed validation
}

// receiver is one kind of message a part takes from cell ("" or
// transport.AllCells as the transport has them).
type receiver struct {
	kind transport.Kind
	cell string
	fn   func(transport.Message)
}

// joinFleet connects host id to the fleet's NATS servers, embedding one
// first when embed says this host serves NATS and the config has it.
func joinFleet(cfg *config.Config, id Identity, embed bool) (*fleetNode, error) {
	n := cfg.Cluster.NATS
	cell, err := id.hostCell(cfg)
	if err != nil {
		return nil, err
	}
	f := &fleetNode{cell: cell, subs: map[transport.Kind]*transport.Subscription{}}
	tls := natsTLS(n)
	host := id.hostID()
	if e := n.Embed; e != nil && embed {
		f.srv, err = transport.Embed(transport.EmbedOptions{
			Listen: e.Listen, ClusterListen: e.ClusterListen, Routes: e.Routes,
			ServerName: host, Hosts: transportHosts(cfg), SeedFile: id.NKeySeed, TLS: tls,
			// Each server keeps its own JetStream files, also when several
			// run on one machine.
			StoreDir: filepath.Join(e.StoreDir, host),
		})
		if err != nil {
			return nil, err
		}
	}
	roles := make([]transport.Role, 0, len(config.Roles))
	for _, r := range config.Roles {
		if id.has(r) {
			roles = append(roles, transport.Role(r))
		}
	}
	f.conn, err = transport.Connect(transport.Options{URLs: n.URLs, ID: host, Cell: cell, Roles: roles, NKeySeedFile: id.NKeySeed, TLS: tls})
	if err != nil {
		if f.srv != nil {
			f.srv.Shutdown()
		}
		return nil, err
	}
	return f, nil
}

// receive has start subscribe fn to kind from cell.
func (f *fleetNode) receive(kind transport.Kind, cell string, fn func(transport.Message)) {
	f.receivers = append(f.receivers, receiver{kind, cell, fn})
}

// publish sends payload of kind under plan p, in the current push slot.
func (f *fleetNode) publish(kind transport.Kind, p *Plan, payload []byte) error {
	slot := uint64(time.Now().UnixNano() / int64(p.Config.Aggregation.PushInterval))
	return f.conn.Publish(kind, slot, p.Config.Hash, payload)
}

// setHosts gives an embedded server the host list of cfg, replacing
// that of cur, before cfg's plan reaches the other parts: receivers must
// not take a host the servers still refuse, nor the servers let in one
// receivers drop. It takes the config as loaded, whose errors name lines.
func (f *fleetNode) setHosts(cur, cfg *config.Config) error {
	if f.srv == nil || reflect.DeepEqual(cur.Cluster.NATS.Hosts, cfg.Cluster.NATS.Hosts) {
		return nil
	}
	if err := f.srv.SetHosts(transportHosts(cfg)); err != nil {
		return cfg.Errorf("cluster.nats.hosts", "%v", err)
	}
	return nil
}

// apply has nothing to do: the subscriptions read the plan applied as
// each message comes, and setHosts runs before a reload's plan is applied.
func (f *fleetNode) apply(*Plan) error { return nil }

// start subscribes the receivers and, when the fleet sections come from
// the bucket, watches it for new revisions.
func (f *fleetNode) start() error {
	for _, r := range f.receivers {
		if err := f.subscribe(r.kind, r.cell, r.fn); err != nil {
			return err
		}
	}
	if f.store == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	f.mu.Lock()
	f.watching, f.watched = cancel, done
	f.mu.Unlock()
	go func() {
		defer close(done)
		if err := f.watchConfig(ctx); err != nil && ctx.Err() == nil {
			slog.Error("watching the config bucket", "error", err)
		}
	}()
	return nil
}

// stop ends the watch, then the subscriptions, last first.
func (f *fleetNode) stop(context.Context, bool) error {
	f.mu.Lock()
	cancel, done := f.watching, f.watched
	subs := f.subsInOrder()
	f.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	var errs []error
	for i := len(subs) - 1; i >= 0; i-- {
		errs = append(errs, subs[i].Unsubscribe())
	}
	return errors.Join(errs...)
}

// subsInOrder are the subscriptions in the order start made them.
func (f *fleetNode) subsInOrder() []*transport.Subscription {
	var out []*transport.Subscription
	for _, r := range f.receivers {
		if s, ok := f.subs[r.kind]; ok {
			out = append(out, s)
		}
	}
	return out
}

// close removes the materialized revisions and leaves the fleet.
func (f *fleetNode) close(context.Context) error {
	f.mu.Lock()
	dir := f.revDir
	f.mu.Unlock()
	var err error
	if dir != "" {
		err = os.RemoveAll(dir)
	}
	f.conn.Close()
	if f.srv != nil {
		f.srv.Shutdown()
	}
	return err
}

// subscribe starts receiving one kind of message from cell (or every
// cell). The transport counts and drops, before anything is allocated for
// them, messages from hosts the config does not allow to send the kind,
// of another length than the kind's, of a slot ahead of this host's
// clock, or made under another config.
func (f *fleetNode) subscribe(kind transport.Kind, cell string, fn func(transport.Message)) error {
	filter := transport.Filter{
		Hash: func(hash uint64) bool { return hash == f.plan().Config.Hash },
		Sender: func(cell, sender string) bool {
			return senderAllowed(f.plan().Config, kind, cell, sender)
		},
		Length: func() int { return messageLength(f.plan().Config, kind) },
		MaxSlot: func() uint64 {
			period := f.plan().Config.Aggregation.PushInterval
			return uint64(time.Now().UnixNano()/int64(period)) + 1
		},
	}
	sub, err := f.conn.Subscribe(kind, cell, filter, fn)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.subs[kind] = sub
	f.mu.Unlock()
	return nil
}

// fetchConfig reads the newest revision of the fleet sections from the
// config bucket and composes it with this host's own file.
func (f *fleetNode) fetchConfig(ctx context.Context) (*config.Config, error) {
	if err := f.conn.WaitConnected(ctx); err != nil {
		return nil, fmt.Errorf("loading the fleet config: %w", err)
	}
	var err error
	// Each attempt is bounded: while the servers' JetStream is still
	// electing its leader a request can wait for its whole context.
	attempt := func(fn func(context.Context) error) error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return fn(actx)
	}
	for f.store == nil {
		if err = attempt(func(c context.Context) (err error) { f.store, err = f.conn.OpenConfigStore(c); return err }); err == nil {
			break
		}
		slog.Warn("waiting for the config bucket", "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("loading the fleet config: %w", errors.Join(err, ctx.Err()))
		case <-time.After(time.Second):
		}
	}
	for {
		// The newest revision that validates: a bad revision pushed
		// before this host started is refused here as a running host
		// refuses it, and the last good one serves. The newest comes by a
		// direct get, which works while a server of the bucket is down;
		// the history is read only when the newest is refused.
		var cfg *config.Config
		var refused []error
		take := func(value []byte, rev uint64) bool {
			got, err := f.composeConfig(value, rev)
			if err != nil {
				refused = append(refused, err)
				return false
			}
			cfg = got
			f.revision.Store(rev)
			return true
		}
		err := attempt(func(c context.Context) error {
			value, rev, err := f.store.Latest(c)
			if err != nil || take(value, rev) {
				return err
			}
			return f.store.Revisions(c, func(value []byte, r uint64) bool { return r < rev && take(value, r) })
		})
		if err == nil {
			// Counted once the outcome is known, not on every retry.
			for _, r := range refused {
				f.refused.Add(1)
				slog.Error("config revision refused", "error", r)
			}
		}
		if err == nil && cfg != nil {
			return cfg, nil
		}
		if err == nil {
			return nil, fmt.Errorf("loading the fleet config: no revision in the bucket validates: %w", errors.Join(refused...))
		}
		slog.Warn("waiting for a config revision: run steadydns config push", "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("loading the fleet config: %w", errors.Join(err, ctx.Err()))
		case <-time.After(time.Second):
		}
	}
}

// composeConfig is this host's config with revision rev of the fleet
// sections, materialized in this process's own temporary directory (two
// hosts with one id on one machine must not share it) so that errors
// name the revision's file and its zone files resolve.
func (f *fleetNode) composeConfig(value []byte, rev uint64) (*config.Config, error) {
	b, err := config.UnmarshalBundle(value)
	if err != nil {
		return nil, fmt.Errorf("config revision %d: %w", rev, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revDir == "" {
		if f.revDir, err = os.MkdirTemp("", "steadydns-config-"); err != nil {
			return nil, fmt.Errorf("config revision %d: %w", rev, err)
		}
	}
	dir := filepath.Join(f.revDir, strconv.FormatUint(rev, 10))
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("config revision %d: %w", rev, err)
	}
	return config.LoadFleet(f.path, b, dir)
}

// watchConfig reloads on every new revision in the bucket. A revision
// that fails validation is refused and logged, and the running config
// keeps serving.
func (f *fleetNode) watchConfig(ctx context.Context) error {
	return f.store.Watch(ctx, func(value []byte, rev uint64) {
		if rev <= f.revision.Load() {
			return
		}
		cfg, err := f.composeConfig(value, rev)
		if err == nil {
			err = f.reload(cfg)
		}
		f.observeReload(err)
		if err != nil {
			f.refused.Add(1)
			slog.Error("config revision refused, the running config stays", "revision", rev, "error", err)
			return
		}
		f.revision.Store(rev)
		slog.Info("config revision applied", "revision", rev)
	})
}

// senderAllowed reports whether host sender, publishing in cell, may send
// messages of kind: frames from the cell's probers, tables from its
// aggregators, state changes from aggregators and admins.
func senderAllowed(cfg *config.Config, kind transport.Kind, cell, sender string) bool {
	h, ok := cfg.Cluster.NATS.Hosts[sender]
	if !ok {
		return false
	}
	switch kind {
	case transport.KindFrame:
		return h.Has(config.RoleProber) && hostCellOf(cfg, h) == cell
	case transport.KindTable:
		return h.Has(config.RoleAggregator) && hostCellOf(cfg, h) == cell
	case transport.KindState:
		return h.Has(config.RoleAggregator) || h.Has(config.RoleAdmin)
	}
	return false
}

// messageLength is the payload length of kind under cfg: every message
// of a kind has one size, so a header announcing another is a lie.
func messageLength(cfg *config.Config, kind transport.Kind) int {
	switch kind {
	case transport.KindFrame:
		return prober.FrameSize(cfg.FrameEntries())
	case transport.KindTable:
		return healthtable.Bytes(cfg.Aggregation.TableSize)
	}
	return transport.StateSize
}

// publisher is the aggregator's Sink in a fleet: every table goes to every
// edge over NATS, whole, every push period.
type publisher struct{ conn *transport.Conn }

func (p publisher) WriteHealth(table []byte, version, configHash, _ uint64) error {
	if err := p.conn.Publish(transport.KindTable, version, configHash, table); err != nil {
		return fmt.Errorf("publishing the health table: %w", err)
	}
	return nil
}
