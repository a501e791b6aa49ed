package transport

import (
	"hash/crc32"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Message is one payload, reassembled from every chunk of one push slot of
// one sender and verified against its checksum.
type Message struct {
	Kind    Kind
	Cell    string // the sender's cell; "" for a state change
	Sender  string // the host id the message was published under
	Slot    uint64 // push slot, the payload's version
	Hash    uint64 // config hash the payload was made under
	Payload []byte // valid only until the callback returns: copy what is kept
}

// Counters count what a Reassembler did with the chunks it was given. Every
// chunk lands in exactly one of Used, Malformed, WrongKind, WrongSender,
// Rejected, Late and Duplicate.
type Counters struct {
	Used        uint64 // chunks that went into an assembly
	Delivered   uint64 // payloads handed to the callback
	Missing     uint64 // slots abandoned with chunks still missing
	Corrupt     uint64 // complete payloads whose checksum did not match
	Malformed   uint64 // chunks with a bad header or subject
	WrongKind   uint64 // chunks whose header's kind is not their subject's
	WrongSender uint64 // chunks whose header's sender is not their subject's
	Rejected    uint64 // chunks made under a config hash the receiver does not accept
	Late        uint64 // chunks of a slot older than the sender's newest
	Duplicate   uint64 // chunks already received, or of a slot already delivered
	Dropped     uint64 // messages the client discarded before Add (Subscription only)
}

// LogEvery is the least time between two log lines about the same kind of
// dropped chunk: a fleet that disagrees on the config would otherwise log
// every chunk of every period.
const LogEvery = 10 * time.Second

// Reassembler turns chunks of one kind into messages. It keeps one assembly
// per sender: a chunk of a newer slot abandons the sender's incomplete one
// (counted as Missing), and a chunk of another config hash or another
// payload never mixes into an assembly. Add is not safe for concurrent use;
// Counters is.
type Reassembler struct {
	kind    Kind
	accept  func(hash uint64) bool
	fn      func(Message)
	senders map[string]*assembly // by cell and sender
	log     *limiter
	h       header

	used, delivered, missing, corrupt                      atomic.Uint64
	malformed, wrongKind, wrongSender, rejected, late, dup atomic.Uint64
}

// assembly is one sender's payload in progress.
type assembly struct {
	h    header // of the slot in progress; index unused
	size int    // data bytes per chunk
	have []bool // per chunk
	got  uint32
	done bool // delivered or corrupt: the slot's later chunks are duplicates
	buf  []byte
}

// NewReassembler makes a reassembler for chunks of kind. accept says whether
// the receiver uses payloads made under a config hash (nil accepts every
// hash); fn receives every complete, verified payload, on the goroutine that
// calls Add.
func NewReassembler(kind Kind, accept func(hash uint64) bool, fn func(Message)) *Reassembler {
	return &Reassembler{kind: kind, accept: accept, fn: fn, senders: map[string]*assembly{}, log: newLimiter(LogEvery)}
}

// Add takes one chunk received on subject.
func (r *Reassembler) Add(subject string, chunk []byte) {
	kind, cell, sender, ok := parseSubject(subject)
	if !ok {
		r.malformed.Add(1)
		r.log.warn("malformed", "dropping a message on an unknown subject", "kind", r.kind, "subject", subject)
		return
	}
	h := &r.h
	data, err := h.parse(chunk)
	if err != nil {
		r.malformed.Add(1)
		r.log.warn("malformed", "dropping a malformed chunk", "kind", r.kind, "subject", subject, "error", err)
		return
	}
	if h.kind != kind || kind != r.kind {
		r.wrongKind.Add(1)
		r.log.warn("kind", "dropping a chunk of another kind than its subject", "subject", subject, "chunk_kind", h.kind)
		return
	}
	if h.sender != sender {
		r.wrongSender.Add(1)
		r.log.warn("sender", "dropping a chunk whose sender is not its subject's", "subject", subject, "chunk_sender", h.sender)
		return
	}
	if r.accept != nil && !r.accept(h.hash) {
		r.rejected.Add(1)
		r.log.warn("hash", "rejecting a message made under another config", "kind", r.kind, "sender", sender, "config_hash", h.hash)
		return
	}
	// A sender's messages in two cells are two streams, never mixed.
	key := cell + "." + sender
	a := r.senders[key]
	switch {
	case a == nil:
		a = &assembly{}
		r.senders[key] = a
		a.start(h, len(data))
	case h.slot < a.h.slot:
		r.late.Add(1)
		return
	case h.slot > a.h.slot || !a.same(h, len(data)):
		// A newer slot, or another payload for the same slot (a sender
		// restarted within its period): what was gathered is not mixed in.
		if !a.done {
			r.missing.Add(1)
			r.log.warn("missing", "abandoning an incomplete message", "kind", r.kind, "sender", sender, "slot", a.h.slot, "chunks", a.got, "of", a.h.count)
		}
		a.start(h, len(data))
	case a.done || a.have[h.index]:
		r.dup.Add(1)
		return
	}
	r.used.Add(1)
	copy(a.buf[int(h.index)*a.size:], data)
	a.have[h.index] = true
	a.got++
	if a.got < a.h.count {
		return
	}
	a.done = true
	payload := a.buf[:a.h.length]
	if crc32.Checksum(payload, castagnoli) != a.h.sum {
		r.corrupt.Add(1)
		r.log.warn("corrupt", "dropping a message whose checksum does not match", "kind", r.kind, "sender", sender, "slot", a.h.slot)
		return
	}
	r.delivered.Add(1)
	r.fn(Message{Kind: r.kind, Cell: cell, Sender: sender, Slot: a.h.slot, Hash: a.h.hash, Payload: payload})
}

func (a *assembly) start(h *header, size int) {
	a.h, a.size, a.got, a.done = *h, size, 0, false
	n := int(h.count) * size
	if cap(a.buf) < n {
		a.buf = make([]byte, n)
	}
	a.buf = a.buf[:n]
	if cap(a.have) < int(h.count) {
		a.have = make([]bool, h.count)
	}
	a.have = a.have[:h.count]
	clear(a.have)
}

// same reports whether chunk h of size bytes belongs to the payload a gathers.
func (a *assembly) same(h *header, size int) bool {
	return h.slot == a.h.slot && h.hash == a.h.hash && h.count == a.h.count &&
		h.length == a.h.length && h.sum == a.h.sum && size == a.size
}

// Counters returns a snapshot of the counters.
func (r *Reassembler) Counters() Counters {
	return Counters{
		Used: r.used.Load(), Delivered: r.delivered.Load(), Missing: r.missing.Load(),
		Corrupt: r.corrupt.Load(), Malformed: r.malformed.Load(), WrongKind: r.wrongKind.Load(),
		WrongSender: r.wrongSender.Load(), Rejected: r.rejected.Load(), Late: r.late.Load(),
		Duplicate: r.dup.Load(),
	}
}

// limiter logs at most one line per reason per period, saying how many it
// held back since the last one.
type limiter struct {
	every time.Duration
	mu    sync.Mutex // Add and the connection's handlers both log
	last  map[string]time.Time
	held  map[string]int
}

func newLimiter(every time.Duration) *limiter {
	return &limiter{every: every, last: map[string]time.Time{}, held: map[string]int{}}
}

func (l *limiter) warn(reason, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if t, ok := l.last[reason]; ok && now.Sub(t) < l.every {
		l.held[reason]++
		l.mu.Unlock()
		return
	}
	held := l.held[reason]
	l.last[reason], l.held[reason] = now, 0
	l.mu.Unlock()
	if held > 0 {
		args = append(args, "suppressed", held)
	}
	slog.Warn(msg, args...)
}
