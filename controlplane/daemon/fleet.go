package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
)

// Identity is who this host is in a fleet: `steadydns serve --role --id
// --region --nkey-seed`.
type Identity struct {
	Roles    []config.Role // nil: every role
	ID       string        // "": the host name
	Region   string        // the prober's region, shown with its votes
	Cell     string        // the prober's and aggregator's cell; "": the first of cluster.cells
	NKeySeed string        // file holding the host's NKey seed; "": no NKey
}

func (id Identity) has(r config.Role) bool { return id.Roles == nil || slices.Contains(id.Roles, r) }

// hostID is the host's id: --id, or the host name.
func (id Identity) hostID() string {
	if id.ID != "" {
		return id.ID
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "local"
	}
	return h[:min(len(h), prober.MaxProberID)]
}

// fleetIdentity completes id from the host's entry in cluster.nats.hosts:
// the id the seed's key is listed under when --id is not given, and the
// host's roles, cell and region where the flags leave them out. A flag
// that claims more than the entry grants is an error: the servers would
// refuse it anyway, message by message.
func fleetIdentity(cfg *config.Config, id Identity) (Identity, error) {
	if id.NKeySeed == "" {
		return id, cfg.Errorf("cluster.nats.hosts", "a fleet host needs --nkey-seed: the seed of its key in cluster.nats.hosts (steadydns keygen --id NAME makes one)")
	}
	h, err := listedHost(cfg, &id)
	if err != nil {
		return id, err
	}
	key := "cluster.nats.hosts." + id.ID
	if id.Roles == nil {
		for _, r := range config.Roles {
			if h.Has(r) {
				id.Roles = append(id.Roles, r)
			}
		}
		if len(id.Roles) == 0 {
			return id, cfg.Errorf(key+".roles", "host %s plays no server role (prober, aggregator, edge)", id.ID)
		}
	}
	for _, r := range id.Roles {
		if !h.Has(r) {
			return id, cfg.Errorf(key+".roles", "--role %s: host %s may play only %s", r, id.ID, roleList(h.Roles))
		}
	}
	switch {
	case id.Cell == "":
		id.Cell = h.Cell
	case h.Cell != "" && id.Cell != h.Cell:
		return id, cfg.Errorf(key+".cell", "--cell %s: host %s belongs to cell %s", id.Cell, id.ID, h.Cell)
	case h.Cell == "" && id.Cell != cfg.Cluster.Cells[0].Name:
		return id, cfg.Errorf(key+".cell", "--cell %s: host %s belongs to the first cell, %s, unless its entry names another", id.Cell, id.ID, cfg.Cluster.Cells[0].Name)
	}
	switch {
	case id.Region == "":
		id.Region = h.Region
	case h.Region != "" && id.Region != h.Region:
		return id, cfg.Errorf(key+".region", "--region %s: host %s is in region %s", id.Region, id.ID, h.Region)
	}
	return id, nil
}

// listedHost is the entry of the host whose key id.NKeySeed holds: id.ID's,
// which must hold that key, or, when id.ID is empty, the one the key is
// listed under, which becomes id.ID.
func listedHost(cfg *config.Config, id *Identity) (config.Host, error) {
	n := cfg.Cluster.NATS
	pub, err := seedPublicKey(id.NKeySeed)
	if err != nil {
		return config.Host{}, err
	}
	if id.ID == "" {
		host, ok := n.HostByKey(pub)
		if !ok {
			return config.Host{}, cfg.Errorf("cluster.nats.hosts", "the key of --nkey-seed %s, %s, is no host's", id.NKeySeed, pub)
		}
		id.ID = host
	}
	h, ok := n.Hosts[id.ID]
	switch {
	case !ok:
		return h, cfg.Errorf("cluster.nats.hosts", "host %s is not listed: add it with its key (steadydns keygen --id %s prints the line)", id.ID, id.ID)
	case h.Key != pub:
		return h, cfg.Errorf("cluster.nats.hosts."+id.ID+".key", "the seed in %s is key %s, not host %s's", id.NKeySeed, pub, id.ID)
	}
	return h, nil
}

// natsTLS is cluster.nats.tls as the transport takes it.
func natsTLS(n *config.NATS) transport.TLS {
	if n.TLS == nil {
		return transport.TLS{}
	}
	return transport.TLS{CA: n.TLS.CA, Cert: n.TLS.Cert, Key: n.TLS.Key}
}

// seedPublicKey reads an NKey seed file and returns its public key.
func seedPublicKey(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading --nkey-seed: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return "", fmt.Errorf("reading --nkey-seed %s: %w", file, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("reading --nkey-seed %s: %w", file, err)
	}
	return pub, nil
}

// transportHosts is cluster.nats.hosts as the servers enforce it, in id
// order, each prober and aggregator in its cell.
func transportHosts(cfg *config.Config) []transport.Host {
	n := cfg.Cluster.NATS
	ids := make([]string, 0, len(n.Hosts))
	for id := range n.Hosts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]transport.Host, 0, len(ids))
	for _, id := range ids {
		h := n.Hosts[id]
		th := transport.Host{ID: id, Key: h.Key, Cell: hostCellOf(cfg, h)}
		for _, r := range h.Roles {
			th.Roles = append(th.Roles, transport.Role(r))
		}
		out = append(out, th)
	}
	return out
}

// hostCellOf is the cell of a host's prober and aggregator.
func hostCellOf(cfg *config.Config, h config.Host) string {
	if h.Cell != "" {
		return h.Cell
	}
	return cfg.Cluster.Cells[0].Name
}

// fleet is this host's part of a fleet: its NATS connection, the server it
// embeds as an aggregator, and what it receives.
type fleet struct {
	srv      *transport.Server // nil unless an aggregator embeds one
	conn     *transport.Conn
	cell     string                 // this host's cell
	store    *transport.ConfigStore // nil unless the fleet sections come from the bucket
	merge    *edge.Merger           // nil unless an edge
	checkers checkers               // the checkers an aggregator heard

	mu   sync.Mutex
	subs map[transport.Kind]*transport.Subscription

	revDir   string        // where revisions are materialized; made on first use
	revision atomic.Uint64 // config revision in use; 0 for a local file
	refused  atomic.Uint64 // config revisions that failed validation
}

// join embeds a NATS server if this host is an aggregator that should,
// and connects. It records the undos on d.started.
func (d *Daemon) join(cfg *config.Config, id Identity) error {
	n := cfg.Cluster.NATS
	cell, err := id.hostCell(cfg)
	if err != nil {
		return err
	}
	f := &fleet{cell: cell, subs: map[transport.Kind]*transport.Subscription{}}
	d.fleet = f
	tls := natsTLS(n)
	host := id.hostID()
	if e := n.Embed; e != nil && id.has(config.RoleAggregator) {
		srv, err := transport.Embed(transport.EmbedOptions{
			Listen: e.Listen, ClusterListen: e.ClusterListen, Routes: e.Routes,
			ServerName: host, Hosts: transportHosts(cfg), SeedFile: id.NKeySeed, TLS: tls,
			// Each server keeps its own JetStream files, also when several
			// run on one machine.
			StoreDir: filepath.Join(e.StoreDir, host),
		})
		if err != nil {
			return err
		}
		f.srv = srv
		d.started.push(func(context.Context) error { srv.Shutdown(); return nil })
	}
	roles := make([]transport.Role, 0, len(config.Roles))
	for _, r := range config.Roles {
		if id.has(r) {
			roles = append(roles, transport.Role(r))
		}
	}
	conn, err := transport.Connect(transport.Options{URLs: n.URLs, ID: host, Cell: cell, Roles: roles, NKeySeedFile: id.NKeySeed, TLS: tls})
	if err != nil {
		return err
	}
	f.conn = conn
	d.started.push(func(context.Context) error { conn.Close(); return nil })
	return nil
}

// fetchConfig reads the newest revision of the fleet sections from the
// config bucket and composes it with this host's own file.
func (d *Daemon) fetchConfig(ctx context.Context) (*config.Config, error) {
	f := d.fleet
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
			got, err := d.composeConfig(value, rev)
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
func (d *Daemon) composeConfig(value []byte, rev uint64) (*config.Config, error) {
	b, err := config.UnmarshalBundle(value)
	if err != nil {
		return nil, fmt.Errorf("config revision %d: %w", rev, err)
	}
	f := d.fleet
	if f.revDir == "" {
		if f.revDir, err = os.MkdirTemp("", "steadydns-config-"); err != nil {
			return nil, fmt.Errorf("config revision %d: %w", rev, err)
		}
		dir := f.revDir
		d.started.push(func(context.Context) error { return os.RemoveAll(dir) })
	}
	dir := filepath.Join(f.revDir, strconv.FormatUint(rev, 10))
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("config revision %d: %w", rev, err)
	}
	return config.LoadFleet(d.path, b, dir)
}

// watchConfig reloads on every new revision in the bucket. A revision
// that fails validation is refused and logged, and the running config
// keeps serving.
func (d *Daemon) watchConfig(ctx context.Context) error {
	f := d.fleet
	return f.store.Watch(ctx, func(value []byte, rev uint64) {
		if rev <= f.revision.Load() {
			return
		}
		cfg, err := d.composeConfig(value, rev)
		if err == nil {
			err = d.reloadWith(cfg)
		}
		d.metrics.ObserveReload(err)
		if err != nil {
			f.refused.Add(1)
			slog.Error("config revision refused, the running config stays", "revision", rev, "error", err)
			return
		}
		f.revision.Store(rev)
		slog.Info("config revision applied", "revision", rev)
	})
}

// subscribe starts receiving one kind of message from cell (or every
// cell) for as long as the daemon runs. The transport counts and drops,
// before anything is allocated for them, messages from hosts the config
// does not allow to send the kind, of another length than the kind's,
// of a slot ahead of this host's clock, or made under another config.
func (d *Daemon) subscribe(kind transport.Kind, cell string, fn func(transport.Message)) error {
	filter := transport.Filter{
		Hash: func(hash uint64) bool { return hash == d.plan.Load().Config.Hash },
		Sender: func(cell, sender string) bool {
			return senderAllowed(d.plan.Load().Config, kind, cell, sender)
		},
		Length: func() int { return messageLength(d.plan.Load().Config, kind) },
		MaxSlot: func() uint64 {
			period := d.plan.Load().Config.Aggregation.PushInterval
			return uint64(time.Now().UnixNano()/int64(period)) + 1
		},
	}
	sub, err := d.fleet.conn.Subscribe(kind, cell, filter, fn)
	if err != nil {
		return err
	}
	d.fleet.mu.Lock()
	d.fleet.subs[kind] = sub
	d.fleet.mu.Unlock()
	d.started.push(func(context.Context) error { return sub.Unsubscribe() })
	return nil
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

var adminValues = []string{health.AdminAuto, health.AdminUp, health.AdminDown}

// SetAdmin forces a check up or down, or back to auto. In a fleet the
// change goes to every aggregator, this one included.
func (d *Daemon) SetAdmin(id, value string) error {
	v := slices.Index(adminValues, value)
	switch {
	case v < 0:
		return fmt.Errorf("setting admin state of %s: %q is not auto, up or down", id, value)
	case d.fleet == nil:
		return d.agg.SetAdmin(id, value)
	}
	if err := d.takesState(); err != nil {
		return fmt.Errorf("setting admin state of %s: %w", id, err)
	}
	return d.publishState(transport.StateChange{Kind: transport.StateAdmin, Value: uint8(v), Check: id})
}

// SetExternal reports an external check's state, which holds for its ttl.
func (d *Daemon) SetExternal(id string, up bool) error {
	if d.fleet == nil {
		return d.agg.SetExternal(id, up, time.Now())
	}
	if err := d.takesState(); err != nil {
		return fmt.Errorf("setting external state of %s: %w", id, err)
	}
	p := d.plan.Load()
	if k, ok := p.Config.Checks.Find(id); ok && p.Config.Checks.Type(k) != config.CheckExternal {
		return fmt.Errorf("setting external state of %s: it is a %s check", id, p.Config.Checks.Type(k))
	}
	var v uint8
	if up {
		v = 1
	}
	return d.publishState(transport.StateChange{Kind: transport.StateExternal, Value: v, Check: id})
}

func (d *Daemon) publishState(s transport.StateChange) error {
	p := d.plan.Load()
	if !p.Config.Checks.Has(s.Check) {
		return fmt.Errorf("setting the state of %s: %w", s.Check, health.ErrUnknownCheck)
	}
	b, err := s.Encode()
	if err != nil {
		return err
	}
	slot := uint64(time.Now().UnixNano() / int64(p.Config.Aggregation.PushInterval))
	return d.fleet.conn.Publish(transport.KindState, slot, p.Config.Hash, b)
}

// takesState says why this host does not take state changes: only an
// aggregator's API does, besides the operator's key (steadydns state). An
// edge, the most exposed host, has no say over health.
func (d *Daemon) takesState() error {
	if d.id.has(config.RoleAggregator) {
		return nil
	}
	aggs := d.plan.Load().Config.Cluster.NATS.HostsWith(config.RoleAggregator)
	return fmt.Errorf("%w: only aggregators take state changes: send it to the API of %s, or use steadydns state with an admin key",
		api.ErrWrongHost, strings.Join(aggs, ", "))
}

// applyState is an aggregator taking a state change from an aggregator or
// an admin; the transport has dropped every other sender's.
func (d *Daemon) applyState(m transport.Message) {
	s, err := transport.DecodeState(m.Payload)
	v, id := s.Value, s.Check
	var what string
	if err == nil {
		switch s.Kind {
		case transport.StateAdmin:
			if int(v) < len(adminValues) {
				what = "admin " + adminValues[v]
				err = d.agg.SetAdmin(id, adminValues[v])
			} else {
				err = fmt.Errorf("admin value %d", v)
			}
		case transport.StateExternal:
			what = "external " + map[bool]string{true: "up", false: "down"}[v == 1]
			err = d.agg.SetExternal(id, v == 1, time.Now())
		}
	}
	if err != nil {
		slog.Warn("state change dropped", "from", m.Sender, "error", err)
		return
	}
	slog.Info("state change applied", "from", m.Sender, "check", id, "state", what)
}

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
	b, err := transport.StateChange{Kind: k, Value: v, Check: check}.Encode()
	if err != nil {
		return err
	}
	conn, err := ConnectAdmin(ctx, cfg, id)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The hash the hosts serve under folds in the table's layout.
	p, err := Build(cfg, nil)
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
