package daemon

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/steadydns/steadydns/controlplane/config"
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

// hostCell is the cell this host's prober and aggregator belong to:
// --cell, or the first of cluster.cells.
func (id Identity) hostCell(cfg *config.Config) (string, error) {
	if id.Cell == "" {
		return cfg.Cluster.Cells[0].Name, nil
	}
	if _, ok := cfg.Cell(id.Cell); !ok {
		return "", cfg.Errorf("cluster.cells", "--cell %s is not in cluster.cells (%v)", id.Cell, cfg.CellNames())
	}
	return id.Cell, nil
}

func roleList(roles []config.Role) string {
	if roles == nil {
		roles = config.Roles
	}
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}
