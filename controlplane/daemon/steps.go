package daemon

import (
	"context"
	"errors"
	"time"
)

// shutdownTimeout bounds the wait for queries and requests in flight when
// the fallback and the API stop.
const shutdownTimeout = 5 * time.Second

// steps are what a start has started, each with its undo, in the order
// started. A failed start and Close undo them in reverse, so nothing stops
// while something started after it still uses it: the push loop stops
// before the prober that feeds it and the maps it writes, the fallback
// before the maps it answers from.
type steps []step

type step struct {
	undo func(context.Context) error
	// failedOnly marks an undo that Close skips: XDP attached by a start
	// that failed goes, but a running daemon leaves it attached.
	failedOnly bool
}

func (s *steps) push(undo func(context.Context) error) { *s = append(*s, step{undo: undo}) }

func (s *steps) pushFailed(undo func(context.Context) error) {
	*s = append(*s, step{undo: undo, failedOnly: true})
}

// undo runs every undo, last first, and joins their errors. failed says
// the start failed rather than the daemon closing.
func (s steps) undo(failed bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].failedOnly && !failed {
			continue
		}
		errs = append(errs, s[i].undo(ctx))
	}
	return errors.Join(errs...)
}
