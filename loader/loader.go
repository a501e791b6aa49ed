// Package loader loads the steadydns XDP object, sets its load-time
// constants, pins its maps under bpffs and attaches it through bpf_link.
//
// Maps are pinned in a directory named after a hash of their layout, so a
// restart of the same build reuses the records and health table, while a
// build whose layout changed gets fresh maps instead of misreading old ones.
// Links are pinned above those directories: a restart with a new layout
// swaps the program on the same link, so answers never stop, and then
// removes the old layout's maps (RemoveStaleLayouts).
package loader

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"

	"github.com/cilium/ebpf"

	"github.com/steadydns/steadydns/bpf"
)

// DefaultBPFFS is where maps and links are pinned unless configured.
const DefaultBPFFS = "/sys/fs/bpf/steadydns"

// Options are the load-time settings of the XDP object.
type Options struct {
	BPFFS          string       // base pin directory
	HealthCapacity uint32       // entries in the health table
	RecordCapacity uint32       // record sets the record table holds; 0: DefaultRecordCapacity
	PoolCapacity   uint32       // pools (sets of more than MaxCandidates) the pool map holds; 0: DefaultPoolCapacity
	ExtCapacity    uint32       // sets a slot cannot hold (NeedsExt) the ext map holds; 0: DefaultExtCapacity
	Servers        []netip.Addr // addresses XDP answers for
	// NSID is the value replies carry in an NSID option (RFC 5001) when
	// the query asks for it, at most MaxNSID bytes; empty turns it off.
	NSID []byte
	RRL  RRL // response rate limiting; zero Rate: off
	// SampleEvery sends one in SampleEvery of the queries XDP answers,
	// with their replies, to the samples ring buffer (ReadSamples); 0
	// sends none.
	SampleEvery uint32
}

// Objects are the loaded program and maps, pinned under Dir.
type Objects struct {
	bpf.SteadydnsObjects
	Dir      string // the maps' pins: Base/v<layout hash>
	Base     string // the links' pins, which outlive a change of layout
	records  *recordTable
	rrl      RRL
	rrlTable *rrlTable
}

// Load loads the program and reuses or creates the pinned maps.
func Load(opts Options) (*Objects, error) {
	if opts.BPFFS == "" {
		opts.BPFFS = DefaultBPFFS
	}
	spec, specs, err := prepare(&opts)
	if err != nil {
		return nil, err
	}
	if err := ensureBPFFS(opts.BPFFS); err != nil {
		return nil, err
	}
	if PrivateBPFFS(opts.BPFFS) {
		slog.Warn("the pins are on a bpf file system private to this process's mount namespace: "+
			"they and the xdp link go away when it exits, and xdp stops answering; "+
			"under ip netns exec, run it with nsenter --net=/var/run/netns/NAME instead, or mount bpffs at /sys/fs/bpf in the host namespace",
			"bpffs", opts.BPFFS)
	}
	dir := filepath.Join(opts.BPFFS, layoutVersion(spec))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pin directory %s: %w", dir, err)
	}
	o := &Objects{Dir: dir, Base: opts.BPFFS, rrl: opts.RRL}
	err = spec.LoadAndAssign(&o.SteadydnsObjects, &ebpf.CollectionOptions{
		Maps: ebpf.MapOptions{PinPath: dir},
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			// The whole log is for a developer; the error keeps its last
			// lines.
			slog.Debug("verifier log", "log", fmt.Sprintf("%+v", ve))
			if perr := permissionError(err, capBPF, capPerfmon); perr != err {
				return nil, fmt.Errorf("loading the xdp program: %w", perr)
			}
			return nil, fmt.Errorf("loading the xdp program: %+v", ve)
		}
		return nil, fmt.Errorf("loading the xdp program: %w", permissionError(err, capBPF))
	}
	if err := o.openRRL(specs.Rrl.MaxEntries); err != nil {
		o.SteadydnsObjects.Close()
		return nil, err
	}
	err = o.syncExempt()
	if err == nil && o.RRLOn() {
		err = armClock(o.ArmRrlClock)
	}
	if err != nil {
		o.Close()
		return nil, err
	}
	o.records, err = openRecordTable(o.Records.FD(), o.RecPools.FD(), o.RecExts.FD(), o.RecSize, specs.Records.MaxEntries, opts.RecordCapacity, specs.RecPools.MaxEntries, specs.RecExts.MaxEntries)
	if err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// prepare reads the object and sets its sizes and load-time constants
// from opts, filling in opts' default record capacity.
func prepare(opts *Options) (*ebpf.CollectionSpec, *bpf.SteadydnsSpecs, error) {
	spec, err := bpf.LoadSteadydns()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the bpf object: %w", err)
	}
	return prepareSpec(spec, opts)
}

// prepareSpec is prepare for an object already read.
func prepareSpec(spec *ebpf.CollectionSpec, opts *Options) (*ebpf.CollectionSpec, *bpf.SteadydnsSpecs, error) {
	// The generated specs point into spec, so what is set through them
	// is what loads.
	var specs bpf.SteadydnsSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, nil, fmt.Errorf("reading the bpf object: %w", err)
	}
	if opts.HealthCapacity > 0 {
		specs.Health.MaxEntries = opts.HealthCapacity
	}
	if err := SizeHealthBits(specs.HealthBits, specs.HealthWordMask, int(specs.Health.MaxEntries)); err != nil {
		return nil, nil, err
	}
	if opts.RecordCapacity == 0 {
		opts.RecordCapacity = DefaultRecordCapacity
	}
	specs.Records.MaxEntries = TableSlots(opts.RecordCapacity)
	if opts.PoolCapacity == 0 {
		opts.PoolCapacity = DefaultPoolCapacity
	}
	specs.RecPools.MaxEntries = opts.PoolCapacity
	if opts.ExtCapacity == 0 {
		opts.ExtCapacity = DefaultExtCapacity
	}
	specs.RecExts.MaxEntries = opts.ExtCapacity
	if err := setServers(&specs.SteadydnsVariableSpecs, opts.Servers); err != nil {
		return nil, nil, err
	}
	if err := setNSID(&specs.SteadydnsVariableSpecs, opts.NSID); err != nil {
		return nil, nil, err
	}
	if err := setSeqFence(&specs.SteadydnsVariableSpecs); err != nil {
		return nil, nil, err
	}
	if err := setRRL(&specs, opts.RRL); err != nil {
		return nil, nil, err
	}
	if err := setSample(&specs.SteadydnsVariableSpecs, opts.SampleEvery); err != nil {
		return nil, nil, err
	}
	return spec, &specs, nil
}

// LoadProgram loads the XDP program once more onto o's maps, with opts'
// load-time constants (server addresses, NSID, rate limiting), and starts
// rate limiting's clock if opts turn it on. opts' capacities and table
// size must give o's layout; its pin directory is not read, and the
// exempt prefixes stay those of o's trie. The caller closes the program;
// SwapProgram puts it on o's link. It is for measuring settings side by
// side on one link: every load is compiled anew, and the kernel places
// each of the image's functions at a random offset within a 64-byte
// block, which moves a load's run time by several percent, so a
// comparison needs several loads of each side.
func (o *Objects) LoadProgram(opts Options) (*ebpf.Program, error) {
	spec, _, err := prepare(&opts)
	if err != nil {
		return nil, err
	}
	return o.loadProgram(spec, opts)
}

// LoadProgramFrom is LoadProgram for the program of another build: the
// object at path, a bpf/steadydns_bpfel.o of another revision, whose maps'
// layout must be o's. It is for measuring a change of the program against
// the build before it, on one link under one load.
func (o *Objects) LoadProgramFrom(opts Options, path string) (*ebpf.Program, error) {
	spec, err := ebpf.LoadCollectionSpec(path)
	if err != nil {
		return nil, fmt.Errorf("reading the bpf object %s: %w", path, err)
	}
	p, err := o.LoadProgramSpec(opts, spec)
	if err != nil {
		return nil, fmt.Errorf("loading the bpf object %s: %w", path, err)
	}
	return p, nil
}

// LoadProgramSpec is LoadProgramFrom for an object already read: one
// built from the program's source with other flags, such as the
// benchmark's stage builds (bench/xdpprog), whose maps are the program's.
func (o *Objects) LoadProgramSpec(opts Options, spec *ebpf.CollectionSpec) (*ebpf.Program, error) {
	spec, _, err := prepareSpec(spec, &opts)
	if err != nil {
		return nil, fmt.Errorf("preparing the bpf object: %w", err)
	}
	return o.loadProgram(spec, opts)
}

// loadProgram loads spec's program onto o's maps; see LoadProgram.
func (o *Objects) loadProgram(spec *ebpf.CollectionSpec, opts Options) (*ebpf.Program, error) {
	if dir := filepath.Join(o.Base, layoutVersion(spec)); dir != o.Dir {
		return nil, fmt.Errorf("loading another xdp program: its maps' layout %s differs from the loaded one's (%s)", filepath.Base(dir), filepath.Base(o.Dir))
	}
	var p struct {
		Steadydns   *ebpf.Program `ebpf:"steadydns"`
		ArmRrlClock *ebpf.Program `ebpf:"arm_rrl_clock"`
	}
	err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: o.Dir}})
	if err != nil {
		return nil, fmt.Errorf("loading another xdp program: %w", permissionError(err, capBPF))
	}
	// The timer holds the program of its callback: this one can go.
	defer p.ArmRrlClock.Close()
	if opts.RRL.Rate > 0 {
		if err := armClock(p.ArmRrlClock); err != nil {
			p.Steadydns.Close()
			return nil, err
		}
	}
	return p.Steadydns, nil
}

// Close unmaps the record table and releases the program and maps; pinned
// maps stay.
func (o *Objects) Close() error {
	return errors.Join(o.records.close(), o.rrlTable.close(), o.SteadydnsObjects.Close())
}

// maxServerAddrs is how many addresses of each family the program
// answers for.
const maxServerAddrs = int(bpf.SteadydnsLimitsMAX_SERVER_ADDRS)

func setServers(vars *bpf.SteadydnsVariableSpecs, addrs []netip.Addr) error {
	var v4 [maxServerAddrs]uint32
	var v6 [maxServerAddrs][16]byte
	var n4, n6 int
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case a.Is4() && n4 < maxServerAddrs:
			b := a.As4()
			// Network order in memory, as the packet holds it.
			v4[n4] = uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
			n4++
		case a.Is6() && n6 < maxServerAddrs:
			v6[n6] = a.As16()
			n6++
		default:
			return fmt.Errorf("setting server addresses: more than %d of the family of %s", maxServerAddrs, a)
		}
	}
	for _, s := range []struct {
		v    *ebpf.VariableSpec
		data any
	}{{vars.ServerV4, v4}, {vars.NrServerV4, uint32(n4)}, {vars.ServerV6, v6}, {vars.NrServerV6, uint32(n6)}} {
		if err := s.v.Set(s.data); err != nil {
			return fmt.Errorf("setting %s: %w", s.v.Name, err)
		}
	}
	return nil
}

// Unpin removes the pins of every map, so the maps go away with the last
// program or process that holds them. It walks the generated struct, so a
// map added to the program is unpinned too.
func (o *Objects) Unpin() error {
	maps := reflect.ValueOf(&o.SteadydnsMaps).Elem()
	for i := range maps.NumField() {
		m, ok := maps.Field(i).Interface().(*ebpf.Map)
		if !ok {
			continue
		}
		if err := m.Unpin(); err != nil {
			return fmt.Errorf("unpinning %s: %w", maps.Type().Field(i).Tag.Get("ebpf"), err)
		}
	}
	return nil
}

// RemoveStaleLayouts deletes the pin directories of other layouts under
// Base: maps that a server of another build or capacity left, which no
// link uses once this program is attached.
func (o *Objects) RemoveStaleLayouts() error {
	dirs, err := filepath.Glob(filepath.Join(o.Base, "v*"))
	if err != nil {
		return fmt.Errorf("listing pin directories: %w", err)
	}
	for _, d := range dirs {
		if d == o.Dir {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing stale pin directory %s: %w", d, err)
		}
	}
	return nil
}
