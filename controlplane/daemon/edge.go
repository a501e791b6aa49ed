package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/dnstap"
	"github.com/steadydns/steadydns/controlplane/edge"
	"github.com/steadydns/steadydns/controlplane/fallback"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/presign"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/rrl"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/loader"
)

// edgeServer is the edge: the data plane's maps and the health table in
// them, the fallback, and XDP on the configured interfaces.
type edgeServer struct {
	cfg      *config.Config // the server section a restart alone changes
	host     string
	metrics  *api.Metrics
	explain  func(name string) []string // the debug name's answer
	objs     *loader.Objects
	table    *edge.Table
	outcomes []string
	seed     health.Seed // the pinned table, for an aggregator in process
	// merge builds the table from each cell's aggregators in a fleet; nil
	// where the aggregator in process writes it.
	merge *edge.Merger
	// presign signs the answers XDP may give of signed sets whenever the
	// table or the sets change; presignStop ends its goroutine.
	presign     *presign.Presigner
	presignStop chan struct{}

	view *fallback.Prepared // the plan's, indexed
	fb   *fallback.Server
	// cert is DNS over TLS's certificate (server.tls), read again on
	// every apply, so a reload renews it without a restart.
	cert     atomic.Pointer[tls.Certificate]
	tap      *dnstap.Logger       // server.dnstap, nil without
	samples  *loader.SampleReader // XDP's samples for tap, nil without
	sampling sync.WaitGroup       // the goroutine that hands them to tap
	ifindex  map[string]int       // the configured interfaces, looked up in the namespace served
	attached []string             // links this start made, removed if it fails
}

// openEdge loads the data plane's maps and the table in them. The pinned
// table an earlier run pushed is the aggregator's seed when it runs here
// too: the edge is not cold while it is fresh, and the checks take their
// first states from it, so a restart does not make every endpoint flap.
func openEdge(cfg *config.Config, exts int, host string, m *api.Metrics, explain func(string) []string) (*edgeServer, error) {
	e := &edgeServer{cfg: cfg, host: host, metrics: m, explain: explain}
	var err error
	if e.outcomes, err = loader.OutcomeNames(); err != nil {
		return nil, err
	}
	if e.objs, err = loader.Load(loadOptions(cfg, exts)); err != nil {
		return nil, err
	}
	pinned := make([]byte, healthtable.Bytes(e.objs.HealthCapacity()))
	meta, err := e.objs.ReadHealth(pinned)
	if err != nil {
		return nil, errors.Join(err, e.objs.Close())
	}
	e.table = edge.New(e.objs, meta)
	if e.presign, err = presign.New(e.objs, e.table, time.Now()); err != nil {
		return nil, errors.Join(err, e.objs.Close())
	}
	e.table.OnWrite(e.presign.Kick)
	if meta.Version != 0 {
		e.seed = health.Seed{ConfigHash: meta.ConfigHash, Table: pinned}
	}
	return e, nil
}

// follow makes the edge take its tables from each cell's aggregators,
// switching to another of a cell after timeout without a table.
func (e *edgeServer) follow(timeout time.Duration) {
	e.merge = edge.NewMerger(timeout, e.cfg.Aggregation.TableSize)
}

// takeTable merges a table from a fleet's aggregator and writes the
// result into the data plane.
func (e *edgeServer) takeTable(m transport.Message, stale uint64) {
	err := e.merge.Take(m.Cell, m.Sender, m.Slot, m.Payload, time.Now(), func(table []byte, version, arrivedNs uint64) error {
		return e.table.WriteHealthAt(table, version, m.Hash, stale, arrivedNs)
	})
	if err != nil {
		slog.Warn("health table dropped", "from", m.Sender, "cell", m.Cell, "error", err)
	}
}

// apply writes geo, the zones' SOAs and the record sets into the maps,
// and gives the fallback the plan's zones and records.
func (e *edgeServer) apply(p *Plan) error {
	// Sets the maps cannot hold (more pools than the pool map was sized
	// for at start) leave everything as it was: a restart resizes it.
	sets := p.Compiled.Entries()
	if err := e.objs.FitRecords(sets); err != nil {
		return err
	}
	if t := e.cfg.Server.DoT; t != nil {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return e.cfg.Errorf("server.tls", "loading the certificate and key: %v", err)
		}
		e.cert.Store(&cert)
	}
	if e.merge != nil {
		e.merge.Configure(p.Config.CellNames(), p.entryCells())
	}
	v4, v6 := p.Geo.Entries()
	if err := e.objs.SyncGeo(v4, v6, p.Geo.Orders()); err != nil {
		return err
	}
	for i, z := range p.Zones {
		if i >= e.objs.MaxZones() {
			slog.Warn("more zones than the data plane holds SOAs for: their NODATA goes to the fallback", "zone", z.Origin())
			break
		}
		soa, ok := records.SOA(z)
		if !ok {
			slog.Warn("SOA too long for the data plane: NODATA goes to the fallback", "zone", z.Origin())
		}
		if err := e.objs.PutZoneSOA(i, &soa); err != nil {
			return err
		}
	}
	// The fallback's index is built while the record table is written:
	// for a large zone each takes seconds, and neither reads what the
	// other writes.
	view := &fallback.View{Zones: zone.NewZones(p.Zones...), Records: records.NewAnswerer(p.Compiled, e.table, p.Geo)}
	prepared := make(chan *fallback.Prepared, 1)
	go func() { prepared <- fallback.Prepare(view, e.cfg.Server.Debug.Name) }()
	err := e.objs.SyncRecords(sets)
	ready := <-prepared
	if err != nil {
		return err
	}
	e.view = ready
	e.presign.Configure(presignSets(p))
	e.presign.Kick()
	if e.fb != nil {
		e.fb.SetPrepared(e.view)
	}
	return nil
}

// tapTransports are dnstap's names of the fallback's transports.
var tapTransports = [...]dnstap.Transport{fallback.OverUDP: dnstap.UDP, fallback.OverTCP: dnstap.TCP, fallback.OverTLS: dnstap.TLS}

// start starts the fallback and then attaches XDP, so nothing XDP passes
// goes unanswered.
func (e *edgeServer) start() error {
	s := e.cfg.Server
	m := e.metrics
	opts := fallback.Options{Listen: s.Listen, Observe: m.ObserveFallback, UDP: m.ObserveUDP, OnTCP: m.ObserveTCP, OnPanic: m.ObservePanic,
		TCP: fallback.TCPLimits{MaxConnections: s.TCP.MaxConnections, MaxPerPrefix: s.TCP.MaxPerPrefix,
			IdleTimeout: s.TCP.IdleTimeout, MaxQueries: s.TCP.MaxPipelined, MaxLifetime: s.TCP.MaxLifetime},
		Debug: fallback.Debug{Name: s.Debug.Name, Allow: s.Debug.Allow, Explain: e.explain}}
	if s.RRL != nil {
		opts.RRL = rrl.New(e.objs)
	}
	if s.IDServer {
		opts.ID = e.host
	}
	if s.VersionServer {
		opts.Version = Version()
	}
	opts.NSID = s.NSID
	if t := s.DoT; t != nil {
		opts.TLS = &fallback.TLSOptions{Listen: t.Listen, Config: &tls.Config{MinVersion: tls.VersionTLS12,
			NextProtos:     []string{"dot"}, // RFC 9539's
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return e.cert.Load(), nil }}}
	}
	if d := s.Dnstap; d != nil {
		tap, err := dnstap.Open(dnstap.Config{Socket: d.Socket, TCP: d.TCP}, e.host, "steadydns "+Version())
		if err != nil {
			return e.cfg.Errorf("server.dnstap", "%v", err)
		}
		e.tap = tap
		opts.Tap = func(query, reply []byte, client, local netip.AddrPort, over fallback.Transport, qt, rt time.Time) {
			tap.Log(query, reply, client, local, tapTransports[over], qt, rt)
		}
		m.ObserveDnstap(tap.Counters)
		if d.Sample > 0 {
			if err := e.tapSamples(); err != nil {
				return err
			}
		}
	}
	e.presignStop = make(chan struct{})
	// Renewals wait up to an hour so that those falling close share one
	// rewrite of the entries: they are due days before expiry. Key events
	// are not delayed.
	go e.presign.Run(e.presignStop, time.Hour)
	fb := fallback.New(opts, nil)
	fb.SetPrepared(e.view)
	warnFileLimit(fb.TCPLimits().MaxConnections)
	if err := fb.Start(); err != nil {
		return err
	}
	e.fb = fb
	e.ifindex = map[string]int{}
	for _, ifname := range s.Interfaces {
		// A link an earlier run pinned stays if this start fails, as it
		// stays when a daemon closes; one this start makes goes.
		earlier := e.objs.Linked(ifname)
		mode, err := e.objs.Attach(ifname, loader.Mode(s.XDPMode))
		if err != nil {
			return err
		}
		if !earlier {
			e.attached = append(e.attached, ifname)
		}
		slog.Info("xdp attached", "interface", ifname, "mode", mode)
		iface, err := net.InterfaceByName(ifname)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", ifname, err)
		}
		e.ifindex[ifname] = iface.Index
	}
	// A server of another build or capacity may have left its maps: the
	// links now run this program, so nothing uses them.
	if err := e.objs.RemoveStaleLayouts(); err != nil {
		slog.Warn("removing stale maps", "error", err)
	}
	return nil
}

// stop stops the fallback. XDP stays attached through its pinned link and
// keeps answering from the pinned maps, so a restart does not interrupt
// it; only a failed start removes the links it made.
func (e *edgeServer) stop(ctx context.Context, failed bool) error {
	var errs []error
	for i := len(e.attached) - 1; failed && i >= 0; i-- {
		errs = append(errs, e.objs.Detach(e.attached[i]))
	}
	if e.presignStop != nil {
		close(e.presignStop)
		e.presignStop = nil
	}
	if e.fb != nil {
		errs = append(errs, e.fb.Shutdown(ctx))
	}
	if e.samples != nil {
		if err := e.samples.Flush(); err != nil {
			slog.Warn("dnstap: the last samples are lost", "error", err)
			e.samples.Close()
		}
		e.sampling.Wait()
		e.samples.Close()
	}
	// After the fallback and the samples: what they logged last is sent.
	if e.tap != nil && !e.tap.Close() {
		slog.Warn("dnstap: the reader did not take the last queries in time; they are dropped", "socket", e.cfg.Server.Dnstap.Socket, "tcp", e.cfg.Server.Dnstap.TCP)
	}
	return errors.Join(errs...)
}

func (e *edgeServer) close(context.Context) error { return e.objs.Close() }

// tapSamples hands the samples XDP writes to the dnstap logger, from a
// goroutine of its own that stop ends.
func (e *edgeServer) tapSamples() error {
	r, err := e.objs.ReadSamples()
	if err != nil {
		return err
	}
	e.samples = r
	tap := e.tap
	e.metrics.ObserveDnstapSamples(func() (sent, queueFull, ringFull uint64) {
		sent, queueFull = tap.SampleCounters()
		ringFull, err := e.objs.SampleDrops()
		if err != nil {
			slog.Warn("reading the dnstap sample drops", "error", err)
		}
		return sent, queueFull, ringFull
	})
	e.sampling.Add(1)
	go func() {
		defer e.sampling.Done()
		for {
			s, err := r.Read()
			if errors.Is(err, loader.ErrSamplesEnd) {
				return
			}
			if err != nil {
				slog.Warn("dnstap: XDP's samples are no longer read", "error", err)
				return
			}
			tap.LogSample(s.Query, s.Reply, s.Client, s.Server, s.Time, s.Every)
		}
	}()
	return nil
}

// ready is what the edge still lacks to serve as configured: the fallback
// listening, XDP attached to every configured interface, and a health
// table: before the first table an edge fails open, answering every
// candidate, which it does to keep answering but should not be announced
// for.
func (e *edgeServer) ready() error {
	var missing []string
	if e.fb == nil || len(e.fb.Addrs()) == 0 {
		missing = append(missing, "the fallback is not listening")
	}
	for _, ifname := range e.cfg.Server.Interfaces {
		if !e.objs.LinkedTo(ifname, e.ifindex[ifname]) {
			missing = append(missing, "xdp is not attached to "+ifname)
		}
	}
	if e.table.Meta().Cold {
		missing = append(missing, "no health table yet: every candidate is answered (cold start, failing open)")
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// xdpOutcomes are the data plane's outcome counters, by label.
func (e *edgeServer) xdpOutcomes() (map[string]uint64, error) {
	counts, err := e.objs.Outcomes()
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(counts))
	for i, n := range counts {
		out[e.outcomes[i]] = n
	}
	return out, nil
}

// statuses are the checks of p not in cell skip (the cell this host
// aggregates, whose aggregator says more; "" for none: every check has a
// cell once the config is loaded) as the merged table has them, each from
// the aggregator followed in its cell.
func (e *edgeServer) statuses(p *Plan, skip string) []health.Status {
	var out []health.Status
	cold := e.table.Meta().Cold
	following := e.merge.Following()
	checks := &p.Config.Checks
	for k := range checks.Len() {
		c := checks.Check(k)
		if c.Cell == skip {
			continue
		}
		i := p.Index.EntryOf(k)
		s := health.Status{ID: c.ID, Type: string(c.Type), Index: i, Up: e.table.Up(i)}
		switch agg := following[c.Cell]; {
		case cold:
			s.Up, s.Reason = true, "cold start: no table yet, every candidate is answered"
		case agg == "":
			s.Up, s.Reason = true, "no table of cell "+c.Cell+" yet: the check fails open"
		default:
			s.Reason = "from the table of " + agg
		}
		out = append(out, s)
	}
	return out
}
