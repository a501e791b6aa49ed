package prober

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Checker probes one target once. Check honours the check's timeout and
// returns early when ctx ends. It fills Healthy, Reason, Detail and Latency;
// the Scheduler adds the rest. Checkers are safe for concurrent use.
type Checker interface {
	Check(ctx context.Context) Result
}

// Result is one raw observation of a check. Invert and thresholds are not
// applied: they are the aggregator's.
type Result struct {
	ID      string    // check id
	Index   uint32    // health-table entry the check owns
	Seq     uint64    // increases with every run of the check, across reloads and restarts
	Time    time.Time // when the run started
	Healthy bool
	Reason  Reason
	Detail  string        // for people: "status 503", "connection refused"…
	Latency time.Duration // from start to verdict, failures included
}

// Netns runs fn in the network namespace where probe sockets must be
// created, such as testenv's Host.Do. A nil Netns creates them in the
// process's own namespace.
type Netns func(fn func() error) error

// New builds the checker for s. An empty s.Target probes defaultTarget, the
// address of the answer the check belongs to.
func New(s Spec, defaultTarget netip.Addr) (Checker, error) {
	return NewIn(nil, s, defaultTarget)
}

// NewIn is New with probe sockets created through ns.
func NewIn(ns Netns, s Spec, defaultTarget netip.Addr) (Checker, error) {
	if s.Timeout <= 0 {
		return nil, fmt.Errorf("building %s checker: timeout must be positive, got %s", s.Type, s.Timeout)
	}
	if s.Type == Metric {
		// It asks its URL, whatever the answer's address.
		m, err := newMetric(ns, s)
		if err != nil {
			return nil, fmt.Errorf("building %s checker: %w", s.Type, err)
		}
		return m, nil
	}
	t, err := newTarget(s, defaultTarget)
	if err != nil {
		return nil, fmt.Errorf("building %s checker: %w", s.Type, err)
	}
	p := probe{ns: ns, target: t, timeout: s.Timeout}
	switch s.Type {
	case HTTP, HTTPS:
		h, err := newHTTP(p, s)
		if err != nil {
			return nil, fmt.Errorf("building %s checker: %w", s.Type, err)
		}
		return h, nil
	case TCP:
		return newTCP(p, s), nil
	case UDP:
		return &udpChecker{probe: p, payload: []byte(s.Payload), expect: []byte(s.ExpectReply), re: s.ExpectRegexp}, nil
	case ICMP:
		return newICMP(p), nil
	case DNS:
		return &dnsChecker{probe: p, qname: s.QName, qtype: s.QType, rcode: s.ExpectRcode, answer: s.ExpectAnswer}, nil
	}
	return nil, fmt.Errorf("building checker: unknown type %q", s.Type)
}

// probe is what every checker shares: where to go, how long to wait and
// where to make sockets.
type probe struct {
	ns      Netns
	target  target
	timeout time.Duration
}

// begin starts a run: it applies the timeout and resolves the target.
func (p *probe) begin(ctx context.Context) (context.Context, context.CancelFunc, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	ap, err := p.target.resolve(ctx)
	if err != nil {
		cancel()
	}
	return ctx, cancel, ap, err
}

// in runs fn where sockets belong.
func (p *probe) in(fn func() error) error {
	if p.ns == nil {
		return fn()
	}
	return p.ns(fn)
}

func pass(start time.Time) Result {
	return Result{Healthy: true, Reason: ReasonOK, Latency: time.Since(start)}
}

func fail(start time.Time, r Reason, detail string) Result {
	return Result{Reason: r, Detail: detail, Latency: time.Since(start)}
}

// failErr fails with the reason the error implies. A ctx that has ended
// counts as a timeout whatever error the socket call surfaced first.
func failErr(ctx context.Context, start time.Time, err error) Result {
	// A socket's deadline is the context's, and may cut a read before the
	// context marks itself done: a read cut short can then surface as a
	// parse error of the partial data (bufio hands over a partial line
	// without its error), which is a timeout all the same.
	if d, ok := ctx.Deadline(); errors.Is(ctx.Err(), context.DeadlineExceeded) || ok && !time.Now().Before(d) {
		return fail(start, ReasonTimeout, "timeout")
	}
	r, detail := classify(err)
	return fail(start, r, detail)
}
