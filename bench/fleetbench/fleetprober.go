package fleetbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
	"github.com/steadydns/steadydns/testenv"
)

// ProberStep is one step of the prober's capacity: how many TCP checks it
// ran at the check interval, and whether their results reached the frames
// on time.
type ProberStep struct {
	Checks   int
	Results  float64        // healthy results delivered over those the schedule asks for
	Late     float64        // share of a frame's entries whose result is older than the interval plus two push periods
	Frames   float64        // frames received per push period
	CPUShare float64        // the harness process, of one CPU: the prober, its backends' accepts, the NATS server, the frame reader
	Failed   map[string]int // failed results in the window, by reason
	Pass     bool
	Why      string
}

// backendPorts is how many listening ports the checks spread over, so
// no accept queue is the limit.
const backendPorts = 64

// proberCapacity runs the real scheduler and framer, as `serve --role
// prober` wires them, with TCP checks from the client host to listeners on
// the edge host of a testenv, and publishes its frames over NATS to a
// reader that checks every entry's result is fresh.
func proberCapacity(ctx context.Context, o *FleetOptions, dir string) (out []ProberStep, err error) {
	if len(o.ProberSteps) == 0 {
		return nil, nil
	}
	env, err := testenv.New(testenv.Options{Prefix: o.Prefix})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, env.Close()) }()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range backendPorts {
		var ln net.Listener
		if err := env.Edge.Do(func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf("%s:%d", env.Edge.V4, 20000+i))
			return err
		}); err != nil {
			return nil, fmt.Errorf("listening on the backend host: %w", err)
		}
		lns = append(lns, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	keys, err := newFleetKeys(dir)
	if err != nil {
		return nil, err
	}
	hosts, _, err := keys.cellHosts(cellSpec{checkers: 1})
	if err != nil {
		return nil, err
	}
	srv, err := transport.Embed(transport.EmbedOptions{Listen: "127.0.0.1:0", ServerName: "prober-capacity",
		Hosts: hosts, StoreDir: filepath.Join(dir, "nats-prober")})
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown()
	for _, n := range o.ProberSteps {
		fmt.Fprintf(o.Log, "fleet: prober capacity, %d checks every %v\n", n, o.Interval)
		s, err := proberStep(ctx, o, env, srv.ClientURL(), keys, n)
		if err != nil {
			return out, err
		}
		out = append(out, s)
		fmt.Fprintf(o.Log, "fleet: %d checks: results %.3f, late %.4f, frames %.3f, cpu %.0f%%, pass %v %s\n",
			n, s.Results, s.Late, s.Frames, 100*s.CPUShare, s.Pass, s.Why)
		if !s.Pass {
			break
		}
	}
	return out, nil
}

func proberStep(ctx context.Context, o *FleetOptions, env *testenv.Env, url string, keys *fleetKeys, n int) (ProberStep, error) {
	conn, err := transport.Connect(transport.Options{URLs: []string{url}, ID: "p0", Cell: config.DefaultCell, NKeySeedFile: keys.ids["p0"].seed})
	if err != nil {
		return ProberStep{}, err
	}
	defer conn.Close()
	reader, err := transport.Connect(transport.Options{URLs: []string{url}, ID: "agg", Cell: config.DefaultCell, NKeySeedFile: keys.ids["agg"].seed})
	if err != nil {
		return ProberStep{}, err
	}
	defer reader.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := errors.Join(conn.WaitConnected(wctx), reader.WaitConnected(wctx)); err != nil {
		return ProberStep{}, err
	}
	probes := make(map[string]prober.Probe, n)
	for i := range n {
		probes[fmt.Sprintf("c%d", i)] = prober.Probe{Index: uint32(i + 1), Spec: prober.Spec{Type: prober.TCP,
			Target: env.Edge.V4.String(), Port: uint16(20000 + i%backendPorts), Interval: o.Interval, Timeout: 2 * time.Second}}
	}
	// Frames of n entries, as serve --role prober sizes them
	// (config.FrameEntries) for a checks_per_prober of n.
	framer, err := prober.NewFramer("p0", "", n)
	if err != nil {
		return ProberStep{}, err
	}
	if err := framer.Configure(1, probes); err != nil {
		return ProberStep{}, err
	}
	fr := &frameReader{limit: uint64(o.Interval/o.ProberPush) + 2, seen: map[uint32]entrySeen{}}
	if _, err := reader.Subscribe(transport.KindFrame, config.DefaultCell, transport.Filter{}, fr.take); err != nil {
		return ProberStep{}, err
	}
	var mu sync.Mutex
	var counting bool
	var healthy int
	failed := map[prober.Reason]int{}
	sched := prober.NewScheduler(prober.Options{Netns: env.Client.Do, OnResult: func(r prober.Result) {
		framer.Record(r)
		mu.Lock()
		if counting && r.Healthy {
			healthy++
		} else if counting {
			failed[r.Reason]++
		}
		mu.Unlock()
	}})
	defer sched.Close()
	if err := sched.Update(probes); err != nil {
		return ProberStep{}, err
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		framer.Run(rctx, o.ProberPush, func(b []byte) {
			slot := binary.LittleEndian.Uint64(b[16:])
			conn.Publish(transport.KindFrame, slot, 1, b) // a lost frame shows as a missing one
		})
	}()
	defer func() { stop(); wg.Wait() }()
	// Every check has run once before the window opens.
	if err := sleepCtx(ctx, o.Interval+3*o.ProberPush); err != nil {
		return ProberStep{}, err
	}
	window := max(time.Duration(o.Pushes)*o.ProberPush, 3*o.Interval)
	mu.Lock()
	counting = true
	mu.Unlock()
	fr.start()
	cpu0, t0 := selfCPU(), time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return ProberStep{}, err
	}
	mu.Lock()
	counting = false
	got := healthy
	s := ProberStep{Failed: map[string]int{}}
	for r, n := range failed {
		s.Failed[r.String()] = n
	}
	mu.Unlock()
	elapsed := time.Since(t0)
	frames, late, entries := fr.stop()
	s.Checks, s.Pass = n, true
	s.Results = float64(got) / (float64(n) * elapsed.Seconds() / o.Interval.Seconds())
	s.Frames = float64(frames) / (elapsed.Seconds() / o.ProberPush.Seconds())
	s.CPUShare = float64(selfCPU()-cpu0) / float64(elapsed)
	if entries > 0 {
		s.Late = float64(late) / float64(entries)
	}
	switch {
	case s.Results < 0.99:
		s.Pass, s.Why = false, fmt.Sprintf("%.1f%% of the results the schedule asks for arrived healthy; failed: %v", 100*s.Results, s.Failed)
	case s.Late > 0.001:
		s.Pass, s.Why = false, fmt.Sprintf("%.2f%% of the frames' entries were late", 100*s.Late)
	case s.Frames < 0.95:
		s.Pass, s.Why = false, fmt.Sprintf("%.0f%% of the frames arrived", 100*s.Frames)
	}
	return s, nil
}

// frameReader reads a prober's frames as an aggregator would and counts
// entries whose result has not changed for longer than the check interval
// plus two push periods: a result the prober ran late or not at all.
type frameReader struct {
	limit uint64 // push slots an entry may keep its seq

	mu            sync.Mutex
	on            bool
	frames        int
	late, entries int
	seen          map[uint32]entrySeen
}

type entrySeen struct{ seq, slot uint64 }

func (f *frameReader) take(m transport.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := m.Payload
	for p := prober.HeaderSize; p+prober.EntrySize <= len(b); p += prober.EntrySize {
		idx := binary.LittleEndian.Uint32(b[p:])
		seq := binary.LittleEndian.Uint64(b[p+8:])
		if seq == 0 {
			continue
		}
		e, ok := f.seen[idx]
		if !ok || e.seq != seq {
			f.seen[idx] = entrySeen{seq: seq, slot: m.Slot}
		}
		if f.on {
			f.entries++
			if ok && e.seq == seq && m.Slot-e.slot > f.limit {
				f.late++
			}
		}
	}
	if f.on {
		f.frames++
	}
}

func (f *frameReader) start() {
	f.mu.Lock()
	f.on = true
	f.mu.Unlock()
}

func (f *frameReader) stop() (frames, late, entries int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = false
	return f.frames, f.late, f.entries
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// selfCPU is this process's user plus system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
