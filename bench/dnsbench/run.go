package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bench/stats"
)

// Results are everything one run measured.
type Results struct {
	Machine      stats.Machine
	Options      Options
	Started      time.Time
	Servers      []ServerResult
	ConstantWork *ConstantWork `json:"Work"` // nil when no constant-work size was asked for
	Agg          *Aggregator   // nil when no push rounds were asked for
	Commands     []string      // the load generators' command lines, as run
}

// Run builds the test hosts, measures every server with the same zone and
// load, the servers taking turns in each of o.Runs rounds, then the
// constant-work cells and the aggregator, and removes the hosts.
func Run(ctx context.Context, o Options) (res *Results, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("running as uid %d: the benchmark loads XDP programs and builds network namespaces, so it needs root", os.Geteuid())
	}
	if err := ensureTools(o.Log, o.Servers); err != nil {
		return nil, err
	}
	res = &Results{Machine: stats.ThisMachine(), Options: o, Started: time.Now().UTC()}
	dir, err := os.MkdirTemp("", "steadydns-bench-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	z, err := writeZone(dir, o.Names)
	if err != nil {
		return nil, err
	}
	r, err := newRig(o, dir, z)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	// The kernel's BPF run-time statistics, what
	// `sysctl kernel.bpf_stats_enabled=1` turns on, for as long as the fd lives.
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return nil, fmt.Errorf("enabling bpf run-time stats: %w", err)
	}
	defer stats.Close()

	runs := make([]*serverRuns, len(o.Servers))
	for i, name := range o.Servers {
		runs[i] = newServerRuns(serverNamed(name))
	}
	for round := range o.Runs {
		for i, name := range o.Servers {
			if err := r.measure(ctx, serverNamed(name), runs[i], round); err != nil {
				return nil, fmt.Errorf("measuring %s: %w", name, err)
			}
		}
	}
	for _, m := range runs {
		res.Servers = append(res.Servers, m.result())
	}
	res.setRatios()
	if len(o.ConstantWorkSizes) > 0 {
		if res.ConstantWork, err = r.constantWork(ctx); err != nil {
			return nil, err
		}
	}
	if o.PushRounds > 0 {
		if res.Agg, err = r.aggregator(); err != nil {
			return nil, err
		}
	}
	res.Commands = r.cmds
	return res, nil
}

// setRatios divides every server's rate by the reflector's.
func (res *Results) setRatios() {
	var ceiling float64
	for _, s := range res.Servers {
		if s.Name == "reflector" {
			ceiling = s.Answered.Median
		}
	}
	if ceiling == 0 {
		return
	}
	for i := range res.Servers {
		res.Servers[i].Ratio = res.Servers[i].Answered.Median / ceiling
	}
}
