package prober

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// LoadOptions describe a load run: Probes copies of Spec, each under its
// own id, so the offered rate is Probes / Spec.Interval checks a second.
type LoadOptions struct {
	Spec     Spec
	Probes   int
	Target   netip.Addr    // for a Spec without a target
	Workers  int           // 0 means DefaultWorkers
	Warmup   time.Duration // run before measuring; at least one interval, so every probe has started
	Duration time.Duration // measured window
	Netns    Netns
}

// LoadReport is what a load run measured in its window.
type LoadReport struct {
	Offered float64        // checks/s the schedule asks for
	Checks  int            // results delivered
	Failed  map[Reason]int // failed results by reason
	Elapsed time.Duration
	CPU     time.Duration // user + system time of the whole process
}

// Rate is the delivered checks per second.
func (r LoadReport) Rate() float64 { return float64(r.Checks) / r.Elapsed.Seconds() }

// CPUPerCheck is the process's CPU time per delivered check. It includes
// anything else the process runs, so keep backends out of it.
func (r LoadReport) CPUPerCheck() time.Duration {
	if r.Checks == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Checks)
}

func (r LoadReport) String() string {
	return fmt.Sprintf("offered %.0f/s, delivered %.0f/s, CPU %s/check (%.0f%% of a core), failed %v",
		r.Offered, r.Rate(), r.CPUPerCheck(), 100*r.CPU.Seconds()/r.Elapsed.Seconds(), r.Failed)
}

// Load runs a Scheduler over o.Probes copies of o.Spec and measures the
// delivered rate and the process's CPU time per check, for benchmarks.
func Load(ctx context.Context, o LoadOptions) (LoadReport, error) {
	var (
		mu     sync.Mutex
		count  bool
		checks int
		failed = map[Reason]int{}
	)
	s := NewScheduler(Options{Workers: o.Workers, Netns: o.Netns, OnResult: func(r Result) {
		mu.Lock()
		defer mu.Unlock()
		if !count {
			return
		}
		checks++
		if !r.Healthy {
			failed[r.Reason]++
		}
	}})
	defer s.Close()
	probes := make(map[string]Probe, o.Probes)
	for i := range o.Probes {
		probes[fmt.Sprintf("load-%d", i)] = Probe{Spec: o.Spec, Index: uint32(i + 1), Target: o.Target}
	}
	if err := s.Update(probes); err != nil {
		return LoadReport{}, fmt.Errorf("starting load: %w", err)
	}
	if err := sleep(ctx, o.Warmup); err != nil {
		return LoadReport{}, err
	}
	mu.Lock()
	count = true
	cpu0, t0 := cpuTime(), time.Now()
	mu.Unlock()
	if err := sleep(ctx, o.Duration); err != nil {
		return LoadReport{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	count = false
	return LoadReport{
		Offered: float64(o.Probes) / o.Spec.Interval.Seconds(),
		Checks:  checks,
		Failed:  failed,
		Elapsed: time.Since(t0),
		CPU:     cpuTime() - cpu0,
	}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("running load: %w", ctx.Err())
	case <-time.After(d):
		return nil
	}
}

// cpuTime is the process's user plus system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
