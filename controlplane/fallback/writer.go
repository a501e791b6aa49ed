package fallback

import (
	"net"
	"time"

	"github.com/miekg/dns"
)

// replyWriter is the dns.ResponseWriter of one query in a batch, a UDP
// loop's datagram or a TCP connection's message: it packs the reply into
// buf and keeps it for the loop to send with the batch's other replies.
// remote's type, *net.UDPAddr or *net.TCPAddr, is the query's transport.
type replyWriter struct {
	local, remote net.Addr
	buf, reply    []byte
	scratch       scratch
	// batch is when the loop read the query's batch, zero outside a
	// loop. Every reply of a batch waits for the batch's send, so its
	// time is the batch's, from the read to the last reply built: the
	// loop reads the clock twice a batch, not twice a query, since on a
	// VM's clock a read is dear next to an answer from the index.
	batch time.Time
	// outcome is the reply's outcome, for the loop to observe with the
	// batch's time.
	outcome string
	// key is the room of the question's index key, here rather than on
	// the fast path's stack, which would clear it for every query.
	key [maxKey]byte
	// inPlace lets the fast path write its reply over the query, as the
	// UDP loop's datagram buffers allow: each has room for any reply, and
	// nothing reads a query once it is answered. The reply then goes out
	// from the page the query came in on and was parsed from, not from a
	// second page per datagram, as gdnsd's replies do.
	inPlace bool
}

// tcp reports whether w answers a query that came over TCP.
func (w *replyWriter) tcp() bool {
	_, ok := w.remote.(*net.TCPAddr)
	return ok
}

// clock is when the query w answers began: its batch's read, or now
// outside a batch. w may be nil, another writer's.
func (w *replyWriter) clock() time.Time {
	if w == nil || w.batch.IsZero() {
		return time.Now()
	}
	return w.batch
}

// observeReply observes the outcome of the reply to w's query, begun at
// start: at once, or with its batch's time once the batch is answered.
// w may be nil, another writer's.
func (s *Server) observeReply(w *replyWriter, outcome string, start time.Time) {
	if w != nil && !w.batch.IsZero() {
		w.outcome = outcome
		return
	}
	s.opts.Observe(outcome, time.Since(start))
}

func (w *replyWriter) LocalAddr() net.Addr  { return w.local }
func (w *replyWriter) RemoteAddr() net.Addr { return w.remote }

func (w *replyWriter) WriteMsg(m *dns.Msg) error {
	// PackBuffer packs in place only when the buffer's length, not its
	// capacity, holds the message uncompressed; given buf[:0] it would
	// allocate every reply.
	b, err := m.PackBuffer(w.buf[:cap(w.buf)])
	if err != nil {
		return err
	}
	w.reply = b
	return nil
}

func (w *replyWriter) Write(b []byte) (int, error) {
	w.reply = append(w.buf[:0], b...)
	return len(b), nil
}

func (w *replyWriter) Close() error        { return nil }
func (w *replyWriter) TsigStatus() error   { return nil }
func (w *replyWriter) TsigTimersOnly(bool) {}
func (w *replyWriter) Hijack()             {}
