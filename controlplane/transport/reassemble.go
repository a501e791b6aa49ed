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
// Unknown, WrongLength, Future, Rejected, Late and Duplicate.
type Counters struct {
	Used        uint64 // chunks that went into an assembly
	Delivered   uint64 // payloads handed to the callback
	Missing     uint64 // slots abandoned with chunks still missing
	Corrupt     uint64 // complete payloads whose checksum did not match
	Malformed   uint64 // chunks with a bad header or subject
	WrongKind   uint64 // chunks whose header's kind is not their subject's
	WrongSender uint64 // chunks whose header's sender is not their subject's
	Unknown     uint64 // chunks from a sender the fleet config does not name for this kind and cell
	WrongLength uint64 // chunks whose payload length or chunk count is not this kind's
	Future      uint64 // chunks of a slot more than one period ahead of the receiver's clock
	Rejected    uint64 // chunks made under a config hash the receiver does not accept
	Late        uint64 // chunks of a slot older than the sender's newest
	Duplicate   uint64 // chunks already received, or of a slot already delivered
	Dropped     uint64 // messages the client discarded before Add (Subscription only)
}

// LogEvery is the least time between two log lines about the same kind of
// dropped chunk: a fleet that disagrees on the config would otherwise log
// every chunk of every period.
const LogEvery = 10 * time.Second

// MaxChunks bounds the chunks one payload travels in, so a header cannot
// make a receiver keep a large chunk map: a sender uses chunks as large as
// its server allows.
const MaxChunks = 1024

// Filter says which chunks a receiver takes; a nil field takes every one.
// Each is checked against the header before anything is allocated.
type Filter struct {
	// Hash says whether payloads made under a config hash are used.
	Hash func(hash uint64) bool
	// Sender says whether sender, of cell, may send this kind: only
	// those get an assembly, so memory is bounded by the fleet's hosts.
	Sender func(cell, sender string) bool
	// Length is the payload length of this kind under the current
	// config: a header announcing another is dropped.
	Length func() int
	// MaxSlot is the newest slot taken now: one period ahead of the
	// receiver's clock. A later one would hold back every real message
	// of its sender as late.
	MaxSlot func() uint64
}

// Reassembler turns chunks of one kind into messages. It keeps one assembly
// per sender: a chunk of a newer slot abandons the sender's incomplete one
// (counted as Missing), and a chunk of another config hash or another
// payload never mixes into an assembly. Add is not safe for concurrent use;
// Counters is.
type Reassembler struct {
	kind    Kind
	filter  Filter
	fn      func(Message)
	senders map[string]*assembly // by cell and sender
	log     *limiter
	h       header

	used, delivered, missing, corrupt                      atomic.Uint64
	malformed, wrongKind, wrongSender, rejected, late, dup atomic.Uint64
	unknown, wrongLength, future                           atomic.Uint64
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

// NewReassembler makes a reassembler for chunks of kind that filter lets
// through; fn receives every complete, verified payload, on the goroutine
// that calls Add.
func NewReassembler(kind Kind, filter Filter, fn func(Message)) *Reassembler {
	return &Reassembler{kind: kind, filter: filter, fn: fn, senders: map[string]*assembly{}, log: newLimiter(LogEvery)}
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
	if f := r.filter.Sender; f != nil && !f(cell, sender) {
		r.unknown.Add(1)
		r.log.warn("unknown", "dropping a chunk from a sender the fleet config does not name", "kind", r.kind, "cell", cell, "sender", sender)
		return
	}
	if f := r.filter.Length; (f != nil && int(h.length) != f()) || h.count > MaxChunks {
		r.wrongLength.Add(1)
		r.log.warn("length", "dropping a chunk of a payload of another length", "kind", r.kind, "sender", sender, "length", h.length, "chunks", h.count)
		return
	}
	if f := r.filter.MaxSlot; f != nil && h.slot > f() {
		r.future.Add(1)
		r.log.warn("future", "dropping a chunk of a slot ahead of this host's clock", "kind", r.kind, "sender", sender, "slot", h.slot)
		return
	}
	if f := r.filter.Hash; f != nil && !f(h.hash) {
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
	// The last chunk's padding beyond the payload is not kept.
	copy(a.buf[int(h.index)*a.size:], data)
	a.have[h.index] = true
	a.got++
	if a.got < a.h.count {
		return
	}
	a.done = true
	payload := a.buf
	if crc32.Checksum(payload, castagnoli) != a.h.sum {
		r.corrupt.Add(1)
		r.log.warn("corrupt", "dropping a message whose checksum does not match", "kind", r.kind, "sender", sender, "slot", a.h.slot)
		return
	}
	r.delivered.Add(1)
	r.fn(Message{Kind: r.kind, Cell: cell, Sender: sender, Slot: a.h.slot, Hash: a.h.hash, Payload: payload})
}

// start begins gathering the payload of h, whose chunks hold size bytes
// each. It keeps the payload's length and one flag per chunk, no more.
func (a *assembly) start(h *header, size int) {
	a.h, a.size, a.got, a.done = *h, size, 0, false
	n := int(h.length)
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
		WrongSender: r.wrongSender.Load(), Unknown: r.unknown.Load(), WrongLength: r.wrongLength.Load(),
		Future: r.future.Load(), Rejected: r.rejected.Load(), Late: r.late.Load(), Duplicate: r.dup.Load(),
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
