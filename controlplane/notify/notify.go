// Package notify sends each change of a check's state to its receivers:
// webhooks, and in a fleet the aggregator's events subject. Every target
// has a bounded queue and its own goroutine, so a slow or dead receiver
// never holds up the aggregator's push, nor another receiver.
package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// The outcomes Observe counts, per target.
const (
	Sent    = "sent"    // the receiver took the event
	Retried = "retried" // an attempt failed and another follows
	Failed  = "failed"  // the receiver refused it, or every attempt failed
	Dropped = "dropped" // the queue was full: the oldest event went
)

// Target is a receiver and how events reach it.
type Target struct {
	Name   string // in metrics and logs; unique among a Notifier's targets
	Filter health.Filter
	// Send delivers one event's JSON within ctx; a Permanent error is
	// not retried.
	Send       func(ctx context.Context, body []byte) error
	Timeout    time.Duration // per attempt
	Retries    int           // attempts after a failed first
	Backoff    time.Duration // before the first retry, doubling up to MaxBackoff
	MaxBackoff time.Duration
	Queue      int // events waiting; when full the oldest is dropped
	// Delay holds each event until Delay after its time, and then Skip,
	// if set, may drop it: another host that sent it meanwhile.
	Delay time.Duration
	Skip  func(*health.Event) bool
}

// Permanent marks an error a retry cannot mend, such as a receiver's
// 400 Bad Request.
type Permanent struct{ Err error }

func (p *Permanent) Error() string { return p.Err.Error() }
func (p *Permanent) Unwrap() error { return p.Err }

// Notifier hands events to its targets. Its methods are safe for
// concurrent use; Notify never blocks.
type Notifier struct {
	observe func(target, outcome string)

	mu      sync.Mutex
	targets map[string]*runner
	wg      sync.WaitGroup
}

// New makes a notifier without targets. observe counts each outcome of
// each target; nil counts nothing.
func New(observe func(target, outcome string)) *Notifier {
	if observe == nil {
		observe = func(string, string) {}
	}
	return &Notifier{observe: observe, targets: map[string]*runner{}}
}

// Configure makes targets the notifier's. A target of a name it had
// keeps its queue and takes the new settings; one of a name gone stops,
// its queue dropped.
func (n *Notifier) Configure(targets []Target) {
	n.mu.Lock()
	defer n.mu.Unlock()
	keep := map[string]bool{}
	for _, t := range targets {
		keep[t.Name] = true
		if r, ok := n.targets[t.Name]; ok {
			r.set(t)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &runner{t: t, observe: n.observe, cancel: cancel, wake: make(chan struct{}, 1)}
		n.targets[t.Name] = r
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			r.run(ctx)
		}()
	}
	for name, r := range n.targets {
		if !keep[name] {
			r.cancel()
			delete(n.targets, name)
		}
	}
}

// Notify queues ev for every target whose filter selects it.
func (n *Notifier) Notify(ev health.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.targets {
		r.push(ev)
	}
}

// Close stops every target, abandoning what is queued and in flight.
func (n *Notifier) Close() {
	n.Configure(nil)
	n.wg.Wait()
}

// runner is one target's queue and the goroutine that empties it.
type runner struct {
	observe func(target, outcome string)
	cancel  context.CancelFunc
	wake    chan struct{} // a token when the queue gained an event

	mu    sync.Mutex
	t     Target
	queue []health.Event // oldest first
}

func (r *runner) set(t Target) {
	r.mu.Lock()
	r.t = t
	r.mu.Unlock()
}

func (r *runner) settings() Target {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.t
}

func (r *runner) push(ev health.Event) {
	r.mu.Lock()
	if !r.t.Filter.Match(&ev) {
		r.mu.Unlock()
		return
	}
	dropped := max(0, len(r.queue)-r.t.Queue+1)
	r.queue = append(r.queue[:0], r.queue[dropped:]...)
	r.queue = append(r.queue, ev)
	name := r.t.Name
	r.mu.Unlock()
	for range dropped {
		r.observe(name, Dropped)
	}
	if dropped > 0 {
		slog.Warn("notification queue full: the oldest events dropped", "target", name, "dropped", dropped)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest event, waiting for one until ctx ends.
func (r *runner) next(ctx context.Context) (health.Event, bool) {
	for {
		r.mu.Lock()
		if len(r.queue) > 0 {
			ev := r.queue[0]
			r.queue = r.queue[1:]
			r.mu.Unlock()
			return ev, true
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return health.Event{}, false
		case <-r.wake:
		}
	}
}

func (r *runner) run(ctx context.Context) {
	for {
		ev, ok := r.next(ctx)
		if !ok {
			return
		}
		t := r.settings()
		if !sleep(ctx, time.Until(ev.Time.Add(t.Delay))) {
			return
		}
		if t.Skip != nil && t.Skip(&ev) {
			continue
		}
		r.deliver(ctx, t, &ev)
	}
}

// deliver sends one event, retrying with exponential backoff.
func (r *runner) deliver(ctx context.Context, t Target, ev *health.Event) {
	body := Encode(ev)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, t.Timeout)
		err := t.Send(actx, body)
		cancel()
		if err == nil {
			r.observe(t.Name, Sent)
			return
		}
		if ctx.Err() != nil {
			return
		}
		var perm *Permanent
		if attempt >= t.Retries || errors.As(err, &perm) {
			r.observe(t.Name, Failed)
			slog.Warn("notification not delivered", "target", t.Name, "event", ev.ID, "attempts", attempt+1, "error", err)
			return
		}
		r.observe(t.Name, Retried)
		if !sleep(ctx, backoff(&t, attempt)) {
			return
		}
	}
}

// backoff is the wait after failed attempt n (0 the first): Backoff,
// doubling, at most MaxBackoff.
func backoff(t *Target, n int) time.Duration {
	d := t.Backoff
	for range n {
		if d >= t.MaxBackoff/2 {
			return t.MaxBackoff
		}
		d *= 2
	}
	return min(d, t.MaxBackoff)
}

// sleep waits d, or less if ctx ends first; false if it did.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
