// Package daemon runs one steadydns host: it builds a plan from the config
// and composes the parts the host's roles call for (the fleet node, the
// edge, the aggregator, the prober and the API), applying every plan to
// them, at start and on each reload.
package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"net"
	"net/netip"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/geo"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/notify"
	"github.com/steadydns/steadydns/controlplane/records"
	"github.com/steadydns/steadydns/controlplane/rrl"
	"github.com/steadydns/steadydns/controlplane/zone"
	"github.com/steadydns/steadydns/loader"
	"github.com/steadydns/steadydns/prober"
)

// Plan is everything derived from one config, before any of it is applied.
type Plan struct {
	Config   *config.Config
	Zones    []*zone.Zone
	Index    *health.Index
	Compiled *records.Compiled
	Geo      *geo.Table
}

// Build loads the zones and compiles the records of cfg. prev is the
// current check-to-entry assignment, which it keeps. The plan's config is
// cfg.Served(): every error about cfg comes before it.
func Build(cfg *config.Config, prev *health.Index) (*Plan, error) { return build(cfg, prev, true) }

// build is Build; with signing clear, a zone signed online whose keys are
// not on this host stays unsigned, for a plan that is never served.
func build(cfg *config.Config, prev *health.Index, signing bool) (*Plan, error) {
	p := &Plan{Config: cfg}
	for i, zc := range cfg.Zones {
		z, err := zone.Load(zc.Origin, zc.File)
		if err != nil {
			return nil, cfg.Errorf(fmt.Sprintf("zones[%d].file", i), "%v", err)
		}
		if zc.DNSSEC != nil {
			if err := signOnline(cfg, i, z, signing); err != nil {
				return nil, err
			}
		}
		p.Zones = append(p.Zones, z)
	}
	index, err := health.AssignConfig(cfg, prev)
	if err != nil {
		return nil, cfg.Errorf("aggregation.table_size", "%v", err)
	}
	p.Index = index
	// Frames and tables carry the hash, and a receiver drops those of
	// another: with the indexes in it, two hosts whose reload histories
	// placed a check at different entries never read each other's tables.
	cfg.Hash = layoutHash(cfg.Hash, index)
	if p.Compiled, err = records.Compile(cfg, p.Zones, index.AnswerEntry); err != nil {
		return nil, err
	}
	if err := fits(cfg, p.Compiled); err != nil {
		return nil, err
	}
	p.Geo = geo.New(cfg.Server.Geo)
	p.Config = cfg.Served()
	return p, nil
}

// fits checks that the record table can hold the compiled sets: it holds
// server.max_records, and the loader refuses a set past that, which would
// leave a reload half-applied.
func fits(cfg *config.Config, c *records.Compiled) error {
	if n := c.InTable(); n > cfg.Server.MaxRecords {
		return cfg.Errorf("server.max_records", "%d record sets, more than the %d the record table holds", n, cfg.Server.MaxRecords)
	}
	return nil
}

// loadOptions are the loader's options for cfg, whose compiled sets need
// exts ext entries. Serve and detach share them, because the pin
// directory is named after the maps' sizes.
func loadOptions(cfg *config.Config, exts int) loader.Options {
	return loader.Options{
		BPFFS:          cfg.Server.BPFFS,
		HealthCapacity: uint32(cfg.Aggregation.TableSize),
		RecordCapacity: uint32(cfg.Server.MaxRecords),
		PoolCapacity:   loader.PoolsFor(pools(cfg)),
		ExtCapacity:    loader.ExtsFor(exts),
		Servers:        xdpAddrs(cfg.Server.Listen),
		NSID:           cfg.Server.NSID,
		RRL:            rrl.Options(cfg.Server.RRL),
		SampleEvery:    sampleEvery(cfg.Server.Dnstap),
	}
}

// sampleEvery is XDP's dnstap sample rate: none without a place to send
// the samples.
func sampleEvery(d *config.Dnstap) uint32 {
	if d == nil {
		return 0
	}
	return uint32(d.Sample)
}

// pools is how many of cfg's records are pools: more answers than a
// record table slot holds.
func pools(cfg *config.Config) int {
	n := 0
	for _, r := range cfg.Records {
		if len(r.Answers) > loader.MaxCandidates {
			n++
		}
	}
	return n
}

// Check validates a config file as serve would, without touching the
// data plane. It returns the warnings for sets left to the fallback.
func Check(path string) ([]string, error) { return check(path, false) }

// CheckOnHost is Check on the host that is to serve the config: it also
// refuses interfaces this host, in this network namespace, does not have.
func CheckOnHost(path string) ([]string, error) { return check(path, true) }

func check(path string, onHost bool) ([]string, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	p, err := build(cfg, nil, false)
	if err != nil {
		return nil, err
	}
	if onHost {
		if err := checkInterfaces(cfg); err != nil {
			return nil, err
		}
		// The aggregators read the webhooks' header files.
		if _, err := notify.Webhooks(cfg); err != nil {
			return nil, err
		}
	}
	return p.Compiled.Warnings, nil
}

// checkInterfaces refuses a configured interface that does not exist here,
// naming its key: attaching would fail only after the maps were loaded, and
// with the kernel's words rather than the config's.
func checkInterfaces(cfg *config.Config) error {
	var errs []error
	for i, name := range cfg.Server.Interfaces {
		if _, err := net.InterfaceByName(name); err != nil {
			errs = append(errs, cfg.Errorf(fmt.Sprintf("server.interfaces[%d]", i), "no interface %q on this host (ip link lists them)", name))
		}
	}
	return errors.Join(errs...)
}

// xdpAddrs are the listen addresses on port 53: XDP answers UDP port 53
// only, so other ports are left to the fallback alone.
func xdpAddrs(listen []netip.AddrPort) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, ap := range listen {
		if ap.Port() == 53 && !seen[ap.Addr()] {
			seen[ap.Addr()] = true
			out = append(out, ap.Addr().Unmap())
		}
	}
	return out
}

// Probes lists the checks this host's prober runs. A check without a
// target probes the address of the first answer that uses it.
func (p *Plan) Probes() map[string]prober.Probe {
	targets := map[string]netip.Addr{}
	for _, r := range p.Config.Records {
		for _, a := range r.Answers {
			// An alias or a CNAME answer has no address to probe.
			if _, ok := targets[a.Check]; !ok && a.Check != "" && a.Value.IsValid() {
				targets[a.Check] = a.Value
			}
		}
	}
	out := map[string]prober.Probe{}
	checks := &p.Config.Checks
	for k := range checks.Len() {
		// The scheduler keeps a job's probe across reloads that leave it
		// as it was, beyond this config.
		c := checks.Check(k).Clone()
		if spec, ok := probeSpec(&c); ok {
			out[c.ID] = prober.Probe{Spec: spec, Index: p.Index.EntryOf(k), Target: targets[c.ID]}
		}
	}
	return out
}

// entryCells yields each check's entry in the table and its cell: the
// entries an edge's merger takes from each cell's tables. A derived entry
// comes from its check's cell, whose aggregators know the check's state;
// one without a check depends on shifts alone, which every aggregator
// has, and comes from the first cell.
func (p *Plan) entryCells() iter.Seq2[uint32, string] {
	return func(yield func(uint32, string) bool) {
		for k := range p.Index.Len() {
			if !yield(p.Index.EntryOf(k), p.Config.Checks.Cell(k)) {
				return
			}
		}
		first := p.Config.Cluster.Cells[0].Name
		for _, dv := range p.Index.Derived() {
			cell := first
			if dv.Check >= 0 {
				cell = p.Config.Checks.Cell(int(dv.Check))
			}
			if !yield(dv.Entry, cell) {
				return
			}
		}
	}
}

// probeSpec is what the prober needs of c, as loadOptions is what the
// loader needs of the config. ok is false for calculated and external
// checks, which the aggregator evaluates. Thresholds, invert and admin
// stay behind: they apply to results, in the aggregator.
func probeSpec(c *config.Check) (spec prober.Spec, ok bool) {
	t, ok := c.Type.Probed()
	if !ok {
		return prober.Spec{}, false
	}
	return prober.Spec{
		Type:             t,
		Target:           c.Target,
		Port:             c.Port,
		Interval:         c.Interval,
		Timeout:          c.Timeout,
		Path:             c.Path,
		Method:           c.Method,
		Host:             c.Host,
		SNI:              c.SNI,
		TLSVerify:        c.TLSVerify,
		ExpectStatus:     c.ExpectStatus,
		ExpectBody:       c.ExpectBody,
		ExpectBodyRegexp: c.ExpectBodyRegexp,
		KeepAlive:        c.KeepAlive,
		Send:             c.Send,
		Expect:           c.Expect,
		ExpectRegexp:     c.ExpectRegexp,
		Payload:          c.Payload,
		ExpectReply:      c.ExpectReply,
		QName:            c.QName,
		QType:            c.QType,
		ExpectRcode:      c.ExpectRcode,
		ExpectAnswer:     c.ExpectAnswer,
		URL:              c.URL,
		Query:            c.Query,
		Insufficient:     insufficient(c),
	}, true
}

// insufficient is the raw result a metric check reports without data.
// insufficient_data names the check's state, which the aggregator's
// invert would otherwise turn around; last_known repeats a raw verdict,
// which invert turns as it did the first time.
func insufficient(c *config.Check) prober.Insufficient {
	i := prober.Insufficient(c.InsufficientData)
	if !c.Invert {
		return i
	}
	switch i {
	case prober.InsufficientHealthy:
		return prober.InsufficientUnhealthy
	case prober.InsufficientUnhealthy:
		return prober.InsufficientHealthy
	}
	return i
}

// layoutHash folds the check-to-entry assignment into the config hash.
func layoutHash(h uint64, index *health.Index) uint64 {
	f := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h)
	f.Write(b[:])
	for k := range index.Len() {
		f.Write([]byte(index.Checks().ID(k)))
		binary.LittleEndian.PutUint32(b[:4], index.EntryOf(k))
		f.Write(b[:4])
	}
	for _, dv := range index.Derived() {
		binary.LittleEndian.PutUint32(b[:4], dv.Entry)
		binary.LittleEndian.PutUint32(b[4:], uint32(dv.Check))
		f.Write(b[:])
		f.Write([]byte{dv.Region})
	}
	return f.Sum64()
}
