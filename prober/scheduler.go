package prober

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"reflect"
	"sync"
	"time"
)

// DefaultWorkers is the default limit on checks in flight. A prober that
// must keep its schedule while backends hang needs rate × timeout workers
// (10,000/s × 0.5 s = 5,000); each costs a goroutine and a socket.
const DefaultWorkers = 8192

// idleWorker is how long a worker waits for work before it exits, so the
// workers a burst of hanging checks needed do not stay forever.
const idleWorker = 10 * time.Second

// Probe is one check as the scheduler runs it.
type Probe struct {
	Spec   Spec
	Index  uint32     // health-table entry the check owns
	Target netip.Addr // the answer's address, for a check without a target
}

// Options configure a Scheduler.
type Options struct {
	Workers int // checks in flight at most; 0 means DefaultWorkers
	// OnResult receives every result, from the worker that ran the check.
	// It must not block: a slow OnResult holds a worker.
	OnResult func(Result)
	Netns    Netns // where probe sockets are made; nil means this namespace
}

// Scheduler runs every probe once per interval. A probe's runs start at a
// fixed phase within its interval, derived from a hash of its id, so checks
// spread over the interval instead of starting together, and the spread is
// the same on every prober and after every reload.
//
// One dispatcher goroutine keeps the probes in a heap by next run and hands
// due ones to workers, started as needed up to the limit. Workers stay busy
// and keep their grown stacks; a goroutine per probe would sleep most of the
// time, have its stack shrunk by every GC and regrow it on every run.
type Scheduler struct {
	opts   Options
	origin time.Time // phases count from here
	seq0   uint64

	updating sync.Mutex // one Update at a time; held while writing jobs

	mu      sync.Mutex
	jobs    map[string]*job
	queue   jobHeap
	wake    chan struct{} // the queue's head changed
	work    chan *job
	quit    chan struct{} // nil while no goroutines run
	workers int
	wg      sync.WaitGroup // dispatcher and workers
}

// job is one probe and its schedule.
type job struct {
	id      string
	probe   Probe
	checker Checker
	every   time.Duration
	next    time.Duration // since the scheduler's origin: cheaper to compare than time.Time
	pos     int           // in the heap; -1 once removed
	busy    bool          // a run is queued or in flight; the dispatcher skips the slot
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup // the run in flight, for Update to wait on
	seq     uint64         // last seq used; written by the run in flight only
}

// NewScheduler returns a scheduler with no probes; Update gives it some.
func NewScheduler(o Options) *Scheduler {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.OnResult == nil {
		o.OnResult = func(Result) {}
	}
	now := time.Now()
	return &Scheduler{
		opts:   o,
		origin: now,
		// Seqs start at the start time in milliseconds. A check runs at most
		// every 100 ms, so a restarted prober's seqs exceed every seq the
		// previous process sent and the aggregator needs no reset rule.
		seq0: uint64(now.UnixMilli()),
		jobs: map[string]*job{},
		wake: make(chan struct{}, 1),
		work: make(chan *job),
	}
}

// Update makes probes the running set. Unchanged probes keep running
// undisturbed; changed and removed ones are stopped, their runs in flight
// cancelled and waited for, so no result of a stopped probe is delivered
// after Update returns. A changed probe keeps its seq. If any probe cannot
// be built, Update returns the errors and changes nothing.
func (s *Scheduler) Update(probes map[string]Probe) error {
	s.updating.Lock()
	defer s.updating.Unlock()
	// Only Update writes s.jobs, so reading it needs no s.mu, and building
	// checkers (https loads the system roots) does not hold up the dispatcher.
	fresh := map[string]*job{}
	var errs []error
	for id, p := range probes {
		if j, ok := s.jobs[id]; ok && reflect.DeepEqual(j.probe, p) {
			continue
		}
		if p.Spec.Interval <= 0 {
			errs = append(errs, fmt.Errorf("scheduling check %s: interval must be positive", id))
			continue
		}
		c, err := NewIn(s.opts.Netns, p.Spec, p.Target)
		if err != nil {
			errs = append(errs, fmt.Errorf("scheduling check %s: %w", id, err))
			continue
		}
		fresh[id] = &job{id: id, probe: p, checker: c, every: p.Spec.Interval, seq: s.seq0}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.mu.Lock()
	var stopped []*job
	for id, j := range s.jobs {
		if _, keep := probes[id]; !keep || fresh[id] != nil {
			j.cancel()
			heap.Remove(&s.queue, j.pos)
			delete(s.jobs, id)
			stopped = append(stopped, j)
		}
	}
	var quit chan struct{}
	if len(probes) == 0 && s.quit != nil {
		quit, s.quit = s.quit, nil
	}
	s.mu.Unlock()

	for _, j := range stopped {
		j.running.Wait()
		// A checker may hold a connection between runs (http keepalive).
		if c, ok := j.checker.(io.Closer); ok {
			c.Close()
		}
		if f := fresh[j.id]; f != nil {
			f.seq = j.seq
		}
	}
	if quit != nil {
		// No probes, no goroutines: the dispatcher and the workers exit.
		close(quit)
		s.wg.Wait()
		return nil
	}
	if len(fresh) == 0 {
		return nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Since(s.origin)
	for id, j := range fresh {
		j.ctx, j.cancel = context.WithCancel(context.Background())
		j.next = firstRun(Phase(id, j.every), j.every, now)
		s.jobs[id] = j
		heap.Push(&s.queue, j)
	}
	if s.quit == nil {
		s.quit = make(chan struct{})
		s.wg.Add(1)
		go s.dispatch(s.quit)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// Close stops every probe and waits for them.
func (s *Scheduler) Close() {
	s.Update(nil)
}

// dispatch hands due jobs to workers until quit closes.
func (s *Scheduler) dispatch(quit chan struct{}) {
	defer s.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var due []*job
	for {
		s.mu.Lock()
		now := time.Since(s.origin)
		due = due[:0]
		for len(s.queue) > 0 && s.queue[0].next <= now {
			j := s.queue[0]
			if !j.busy {
				j.busy = true
				j.running.Add(1)
				due = append(due, j)
			}
			// The next slot on the grid, skipping any that passed while
			// workers were short: missed runs are never made up in a burst.
			j.next += j.every
			if j.next < now {
				j.next += ((now-j.next)/j.every + 1) * j.every
			}
			heap.Fix(&s.queue, 0)
		}
		wait := time.Hour
		if len(s.queue) > 0 {
			wait = s.queue[0].next - now
		}
		s.mu.Unlock()

		for i, j := range due {
			if !s.hand(j, quit) {
				for _, k := range due[i+1:] {
					s.finish(k)
				}
				return
			}
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-s.wake:
		case <-quit:
			return
		}
	}
}

// hand gives j to an idle worker, or to a new one while under the limit,
// or else waits for one, unless j is stopped meanwhile. It reports false
// when quit closes first.
func (s *Scheduler) hand(j *job, quit chan struct{}) bool {
	select {
	case s.work <- j:
		return true
	default:
	}
	s.mu.Lock()
	spawn := s.workers < s.opts.Workers
	if spawn {
		s.workers++
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if spawn {
		go s.worker(j, quit)
		return true
	}
	select {
	case s.work <- j:
		return true
	case <-j.ctx.Done():
		s.finish(j)
		return true
	case <-quit:
		s.finish(j)
		return false
	}
}

// worker runs j, then whatever comes, until it idles too long or quit.
func (s *Scheduler) worker(j *job, quit chan struct{}) {
	defer s.wg.Done()
	idle := time.NewTimer(idleWorker)
	defer idle.Stop()
	for {
		s.run(j)
		idle.Reset(idleWorker)
		select {
		case j = <-s.work:
			continue
		case <-idle.C:
		case <-quit:
		}
		s.mu.Lock()
		s.workers--
		s.mu.Unlock()
		return
	}
}

// run runs j once and delivers the result unless j was stopped meanwhile.
func (s *Scheduler) run(j *job) {
	defer s.finish(j)
	if j.ctx.Err() != nil {
		return
	}
	j.seq++
	started := time.Now()
	r := j.checker.Check(j.ctx)
	if j.ctx.Err() != nil {
		return // stopped mid-run: the result belongs to a probe that is gone
	}
	r.ID, r.Index, r.Seq, r.Time = j.id, j.probe.Index, j.seq, started
	s.opts.OnResult(r)
}

func (s *Scheduler) finish(j *job) {
	s.mu.Lock()
	j.busy = false
	s.mu.Unlock()
	j.running.Done()
}

// firstRun is the first time at or after now, both since the origin, that
// falls on the phase.
func firstRun(phase, every, now time.Duration) time.Duration {
	if phase >= now {
		return phase
	}
	return phase + (now-phase+every-1)/every*every
}

// Phase is where in each interval a check with this id starts: a hash of
// the id, so it is spread, deterministic and the same on every prober.
func Phase(id string, interval time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64() % uint64(interval))
}

// jobHeap orders jobs by next run, for container/heap.
type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(a, b int) bool { return h[a].next < h[b].next }
func (h jobHeap) Swap(a, b int) {
	h[a], h[b] = h[b], h[a]
	h[a].pos, h[b].pos = a, b
}
func (h *jobHeap) Push(x any) {
	j := x.(*job)
	j.pos = len(*h)
	*h = append(*h, j)
}
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	j.pos = -1
	*h = old[:len(old)-1]
	return j
}
