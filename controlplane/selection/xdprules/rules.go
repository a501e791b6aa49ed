// Package xdprules runs the XDP program's rules on their own, under
// BPF_PROG_RUN, so that tests can hold their Go copies equal to them: the
// answer selection (controlplane/selection) and rate limiting (bpf/rrl.go).
//
// The program in rules.c includes bpf/select.h and bpf/rrl.h and calls the
// functions the XDP program calls: table_open, select_answers and
// answer_ttl, rrl_hash and rrl_charge. The inputs the XDP program takes
// from the query, the maps and the clock travel in the test packet
// instead; the health table is the harness's own health map. Only tests
// import this package, so the server never embeds it.
package xdprules

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/loader"
)

// HealthEntries is the size of the harness's health table, room for a
// check per candidate of the largest pool. A check index past it finds no
// entry, which the selection reads as down.
const HealthEntries = 128

// xdpPass is what the program returns once it has written its output.
const xdpPass = 2

// Harness is the loaded program and its health table.
type Harness struct {
	objs  RulesObjects
	mem   *ebpf.Memory
	table []byte
}

// Input is everything one selection reads.
type Input struct {
	Set   *bpf.Set               // a pool's candidates go to the harness's pool map
	Up    []bool                 // health table: entry i is up when Up[i]; the rest are down
	Order *bpf.SteadydnsGeoOrder // the client region's ranking of regions; nil: no geo
	Meta  bpf.SteadydnsTableMeta // the health table's metadata, for the open rule
	Now   uint64                 // CLOCK_BOOTTIME at the query, for the open rule
	Rnd   uint32                 // the query's random draw
	Turn  uint32                 // the round-robin turn
	// The query's source port, ID and name hash, from which the program
	// draws (query_draw); Result.Draw is the draw they give.
	Port, ID uint16
	Hash     uint64
}

// Result is what the XDP program answers for an Input.
type Result struct {
	Action   bpf.SteadydnsAction // the pick's enum action
	Degraded bool                // a present candidate is down
	Order    []int               // candidate slots, in answer order
	TTL      uint32              // the answers' TTL
	Open     bool                // the open rule held: every candidate counted healthy
	Draw     uint32              // query_draw of Input's Port, ID and Hash
}

// loadSpec reads the program's collection spec, its maps unpinned: they come
// from the XDP program's header, which pins them, and the harness's are
// private and must not meet a running server's. The generated specs point
// into the collection spec, so what is set through them is what loads.
func loadSpec() (*ebpf.CollectionSpec, *RulesSpecs, error) {
	spec, err := LoadRules()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the rules' spec: %w", err)
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	var specs RulesSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, nil, fmt.Errorf("reading the rules' spec: %w", err)
	}
	return spec, &specs, nil
}

// Load loads the program. It needs the privileges of BPF_PROG_LOAD.
func Load() (*Harness, error) {
	spec, specs, err := loadSpec()
	if err != nil {
		return nil, err
	}
	specs.Health.MaxEntries = HealthEntries
	if err := loader.SizeHealthBits(specs.HealthBits, specs.HealthWordMask, HealthEntries); err != nil {
		return nil, err
	}
	// The record table comes with the header and goes unused here; the
	// pool map holds the pool of one selection.
	specs.Records.MaxEntries = 1
	specs.RecPools.MaxEntries = 1
	// The table is encoded by the loader, which encodes the server's: one
	// layout and one stride for both.
	h := &Harness{table: make([]byte, healthtable.Bytes(HealthEntries))}
	if err := spec.LoadAndAssign(&h.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the rules: %w", err)
	}
	mem, err := h.objs.HealthBits.Memory()
	if err != nil {
		h.objs.Close()
		return nil, fmt.Errorf("mapping the health bitmap: %w", err)
	}
	h.mem = mem
	return h, nil
}

// Close releases the program and its maps.
func (h *Harness) Close() error { return h.objs.Close() }

// Select runs one selection through the program.
func (h *Harness) Select(in Input) (Result, error) {
	if len(in.Up) > HealthEntries {
		return Result{}, fmt.Errorf("writing the health table: %d entries, room for %d", len(in.Up), HealthEntries)
	}
	clear(h.table)
	for i, up := range in.Up {
		healthtable.Put(h.table, uint32(i), up, 0)
	}
	if _, err := h.mem.WriteAt(healthtable.Bits(h.table), 0); err != nil {
		return Result{}, fmt.Errorf("writing the health table: %w", err)
	}

	var ti RulesInput
	if err := recode(&ti.Meta, &in.Meta); err != nil {
		return Result{}, err
	}
	rr := in.Set.SteadydnsRrset
	if in.Set.Pool != nil {
		var pool *bpf.SteadydnsRecPool
		rr, pool = loader.EncodePool(0, in.Set, 0)
		if err := h.objs.RecPools.Put(uint32(0), pool); err != nil {
			return Result{}, fmt.Errorf("writing the pool: %w", err)
		}
	}
	if err := recode(&ti.Rr, &rr); err != nil {
		return Result{}, err
	}
	if in.Order != nil {
		ti.Order.Rank, ti.Geo = in.Order.Rank, 1
	}
	ti.Now, ti.Rnd, ti.Turn = in.Now, in.Rnd, in.Turn
	ti.Port, ti.Id, ti.Hash = in.Port, in.ID, in.Hash
	var out RulesOutput
	if err := run(h.objs.RunSelect, &ti, &out); err != nil {
		return Result{}, err
	}
	r := Result{Action: bpf.SteadydnsAction(out.Pick.Action), Degraded: out.Pick.Degraded != 0, TTL: out.Ttl, Open: out.Open != 0, Draw: out.Draw}
	for i := range min(int(out.Pick.N), len(out.Pick.Order)) {
		r.Order = append(r.Order, int(out.Pick.Order[i]))
	}
	return r, nil
}

// recode copies a value of a bpf type into this package's copy of the same C
// type: bpf2go gives each package its own Go type, and the bytes agree.
// run passes in to one of the programs as its packet and decodes what the
// program wrote over it into out. The program returns XDP_PASS once it
// has written its output; anything else means it did not.
func run(p *ebpf.Program, in, out any) error {
	pkt, err := binary.Append(nil, binary.LittleEndian, in)
	if err != nil {
		return fmt.Errorf("encoding the input: %w", err)
	}
	opts := &ebpf.RunOptions{Data: pkt, DataOut: make([]byte, len(pkt))}
	ret, err := p.Run(opts)
	if err != nil {
		return fmt.Errorf("running the program: %w", err)
	}
	if ret != xdpPass {
		return fmt.Errorf("running the program: it returned %d, not XDP_PASS", ret)
	}
	if _, err := binary.Decode(opts.DataOut, binary.LittleEndian, out); err != nil {
		return fmt.Errorf("decoding the output: %w", err)
	}
	return nil
}

func recode(dst, src any) error {
	b, err := binary.Append(nil, binary.LittleEndian, src)
	if err != nil {
		return fmt.Errorf("encoding %T for the harness: %w", src, err)
	}
	n, err := binary.Decode(b, binary.LittleEndian, dst)
	if err != nil {
		return fmt.Errorf("decoding %T as the harness's: %w", src, err)
	}
	if n != len(b) {
		return fmt.Errorf("decoding %T as the harness's: %d of %d bytes", src, n, len(b))
	}
	return nil
}

// RRLHarness is the program loaded with one rule of rate limiting: what
// rrl_charge reads from its load-time constants.
type RRLHarness struct {
	objs RulesObjects
}

// RRLCharge is one charge as the program makes it.
type RRLCharge struct {
	Set     bpf.SteadydnsRrlSet // the set after the charge
	Hash    uint64              // rrl_hash of the key
	Verdict bpf.SteadydnsRrlVerdict
}

// LoadRRL loads the program with rule. It needs the privileges of
// BPF_PROG_LOAD.
func LoadRRL(rule bpf.RRLRule) (*RRLHarness, error) {
	spec, specs, err := loadSpec()
	if err != nil {
		return nil, err
	}
	// The header's tables go unused here.
	specs.Records.MaxEntries = 1
	specs.RecPools.MaxEntries = 1
	specs.Rrl.MaxEntries = 1
	for _, s := range []struct {
		v    *ebpf.VariableSpec
		data any
	}{{specs.RrlOn, uint32(1)}, {specs.RrlIntervalNs, rule.IntervalNs}, {specs.RrlWindowNs, rule.WindowNs}, {specs.RrlSlip, rule.Slip}} {
		if err := s.v.Set(s.data); err != nil {
			return nil, fmt.Errorf("setting %s: %w", s.v.Name, err)
		}
	}
	h := &RRLHarness{}
	if err := spec.LoadAndAssign(&h.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the rules: %w", err)
	}
	return h, nil
}

// Close releases the program and its maps.
func (h *RRLHarness) Close() error { return h.objs.Close() }

// Charge hashes the key (seed, client, v6, resp) with rrl_hash and
// charges a reply to it in set at now with rrl_charge.
func (h *RRLHarness) Charge(set bpf.SteadydnsRrlSet, seed, client uint64, v6 bool, resp, now uint64) (RRLCharge, error) {
	var in RulesRrlInput
	if err := recode(&in.Set, &set); err != nil {
		return RRLCharge{}, err
	}
	in.Seed, in.Client, in.Resp, in.Now = seed, client, resp, now
	if v6 {
		in.V6 = 1
	}
	var out RulesRrlOutput
	if err := run(h.objs.RunRrl, &in, &out); err != nil {
		return RRLCharge{}, err
	}
	c := RRLCharge{Hash: out.Hash, Verdict: bpf.SteadydnsRrlVerdict(out.Verdict)}
	if err := recode(&c.Set, &out.Set); err != nil {
		return RRLCharge{}, err
	}
	return c, nil
}
