package prober

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"time"
)

// replyLimit is how much of a UDP reply is kept and searched.
const replyLimit = 4096

var replies = sync.Pool{New: func() any { return new([replyLimit]byte) }}

// udpChecker sends the payload on a connected socket, so only the target's
// reply is read and an ICMP port unreachable surfaces as "refused". The
// first reply decides.
type udpChecker struct {
	probe
	payload []byte
	expect  []byte         // substring the reply must hold; empty accepts any reply
	re      *regexp.Regexp // or the pattern it must match, when set
}

func (u *udpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel, ap, err := u.begin(ctx)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer cancel()
	c, release, err := u.dial(ctx, "udp", ap)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer release()
	if _, err := c.Write(u.payload); err != nil {
		return failErr(ctx, start, err)
	}
	buf := replies.Get().(*[replyLimit]byte)
	defer replies.Put(buf)
	n, err := c.Read(buf[:])
	if err != nil {
		return failErr(ctx, start, err)
	}
	if u.re != nil && !u.re.Match(buf[:n]) || u.re == nil && !bytes.Contains(buf[:n], u.expect) {
		return fail(start, ReasonReplyMismatch, "reply mismatch")
	}
	return pass(start)
}
