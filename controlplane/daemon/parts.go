package daemon

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// A part is one piece of a host: the fleet node, the edge, the aggregator,
// the prober or the API. Opening one (its open function) takes what later
// parts need; apply takes every plan, the first before start; start begins
// its work. stop ends what start began, also a start that failed half way,
// and close releases what opening took. The daemon stops every part before
// it closes any, so nothing closes while a part still running uses it.
type part interface {
	apply(p *Plan) error
	start() error
	// stop ends the work; failed says the daemon's start failed rather
	// than the daemon closing.
	stop(ctx context.Context, failed bool) error
	close(ctx context.Context) error
}

// present is the parts of ps this host runs: those that are not nil.
func present(ps ...part) []part {
	var out []part
	for _, p := range ps {
		if !reflect.ValueOf(p).IsNil() {
			out = append(out, p)
		}
	}
	return out
}

// shutdownTimeout bounds the wait for queries and requests in flight when
// the fallback and the API stop.
const shutdownTimeout = 5 * time.Second

// undo stops the started parts, last first, then closes the opened ones,
// last first, and joins their errors.
func undo(started, opened []part, failed bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error
	for i := len(started) - 1; i >= 0; i-- {
		errs = append(errs, started[i].stop(ctx, failed))
	}
	for i := len(opened) - 1; i >= 0; i-- {
		errs = append(errs, opened[i].close(ctx))
	}
	return errors.Join(errs...)
}

// backgroundNice is the CPU priority of the aggregation's threads.
const backgroundNice = 10

// background moves the calling goroutine to an OS thread of its own at a
// lower CPU priority, for good: the thread ends with the goroutine. Framing
// and pushing the health table is constant work, milliseconds for a large
// table; at the same priority it would delay the fallback's answers by as
// much whenever both want the CPU. `steadydns serve` gives the process a
// P more than it has CPUs, so the aggregation never holds the last one.
func background() {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice); err != nil {
		slog.Warn("lowering the aggregation's cpu priority", "error", err)
	}
}
