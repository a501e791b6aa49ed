package prober

import (
	"context"
	"time"
)

// tcpChecker passes when the connection is established. It never reads or
// writes, so it skips dial's deadline bookkeeping.
type tcpChecker struct{ probe }

func (t *tcpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel, ap, err := t.begin(ctx)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer cancel()
	c, err := t.connect(ctx, "tcp", ap)
	if err != nil {
		return failErr(ctx, start, err)
	}
	c.Close() // RST: see dialer
	return pass(start)
}
