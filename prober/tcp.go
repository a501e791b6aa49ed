package prober

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"time"
)

// tcpChecker passes when the connection is established and, if it is to
// talk, once send is written and the reply matches. A connect-only check
// never reads or writes, so it skips dial's deadline bookkeeping.
type tcpChecker struct {
	probe
	send   []byte
	expect []byte         // substring the reply must hold
	re     *regexp.Regexp // or the pattern it must match
}

func newTCP(p probe, s Spec) *tcpChecker {
	return &tcpChecker{probe: p, send: []byte(s.Send), expect: []byte(s.Expect), re: s.ExpectRegexp}
}

// reads reports whether the check waits for a reply.
func (t *tcpChecker) reads() bool { return len(t.expect) > 0 || t.re != nil }

func (t *tcpChecker) Check(ctx context.Context) Result {
	start := time.Now()
	ctx, cancel, ap, err := t.begin(ctx)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer cancel()
	if len(t.send) == 0 && !t.reads() {
		c, err := t.connect(ctx, "tcp", ap)
		if err != nil {
			return failErr(ctx, start, err)
		}
		c.Close() // RST: see dialer
		return pass(start)
	}
	c, release, err := t.dial(ctx, "tcp", ap)
	if err != nil {
		return failErr(ctx, start, err)
	}
	defer release()
	if len(t.send) > 0 {
		if _, err := c.Write(t.send); err != nil {
			return failErr(ctx, start, err)
		}
	}
	if !t.reads() {
		return pass(start)
	}
	// The reply is read as it comes, up to the bound HTTP bodies have, so
	// a server that answers in pieces or keeps talking still passes as
	// soon as what has arrived matches.
	buf := bodies.Get().(*[BodyLimit]byte)
	defer bodies.Put(buf)
	n := 0
	for {
		m, err := c.Read(buf[n:])
		n += m
		if t.matches(buf[:n]) {
			return pass(start)
		}
		if n == len(buf) {
			return fail(start, ReasonReplyMismatch, "reply mismatch")
		}
		if err != nil {
			r := failErr(ctx, start, err)
			// A server that answered something else, then closed or went
			// quiet, gave the wrong reply: saying timeout would hide that
			// it is up and talking.
			if errors.Is(err, io.EOF) || n > 0 && r.Reason == ReasonTimeout {
				return fail(start, ReasonReplyMismatch, "reply mismatch")
			}
			return r
		}
	}
}

func (t *tcpChecker) matches(b []byte) bool {
	if t.re != nil {
		return t.re.Match(b)
	}
	return bytes.Contains(b, t.expect)
}
