// Package dnstap logs the fallback's queries and replies as dnstap
// messages (AUTH_QUERY, AUTH_RESPONSE) in Frame Streams to a Unix socket
// or a TCP address, as Knot, NSD, BIND and CoreDNS do.
package dnstap

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	dt "github.com/dnstap/golang-dnstap"
	"google.golang.org/protobuf/proto"
)

// QueueSize bounds the queries waiting to be encoded and sent: past it a
// query is dropped and counted, so a slow or absent reader never slows
// the answers.
const QueueSize = 4096

// Config is where the messages go: a Unix socket or a TCP address.
type Config struct {
	Socket string
	TCP    string
}

// entry is one answered query, copied off the answering path.
type entry struct {
	query, reply []byte
	client       netip.AddrPort
	local        netip.AddrPort
	over         Transport
	qt, rt       time.Time
	every        uint32 // XDP's sample rate for one of its answers, 0 for the fallback's
}

// Logger queues queries and their replies and sends them from its own
// goroutine. Its methods are safe for concurrent use.
type Logger struct {
	identity, version []byte
	queue             chan entry
	out               *dt.FrameStreamSockOutput
	sent, dropped     atomic.Uint64
	sampled           [2]atomic.Uint64 // XDP's samples sent and dropped
	done              sync.WaitGroup
}

// Open starts a logger for c, naming the server identity and version in
// every message. It connects in the background and reconnects as the
// reader comes and goes; what arrives meanwhile waits in the queue.
func Open(c Config, identity, version string) (*Logger, error) {
	var addr net.Addr
	var err error
	switch {
	case c.Socket != "":
		addr = &net.UnixAddr{Name: c.Socket, Net: "unix"}
	case c.TCP != "":
		if addr, err = net.ResolveTCPAddr("tcp", c.TCP); err != nil {
			return nil, fmt.Errorf("resolving the dnstap address %s: %w", c.TCP, err)
		}
	default:
		return nil, fmt.Errorf("opening dnstap: neither a socket nor a tcp address")
	}
	out, err := dt.NewFrameStreamSockOutput(addr)
	if err != nil {
		return nil, fmt.Errorf("opening dnstap to %s: %w", addr, err)
	}
	// A reader that went away is dialled again soon: its queries are
	// dropped meanwhile.
	out.SetRetryInterval(time.Second)
	out.SetTimeout(5 * time.Second)
	out.SetFlushTimeout(time.Second)
	l := &Logger{identity: []byte(identity), version: []byte(version), queue: make(chan entry, QueueSize), out: out}
	l.done.Add(2)
	go func() { defer l.done.Done(); out.RunOutputLoop() }()
	go func() { defer l.done.Done(); l.run() }()
	return l, nil
}

// Transport is what a query came over: dnstap's socket protocol.
type Transport int

const (
	UDP Transport = iota
	TCP
	TLS // DNS over TLS (RFC 7858)
)

// Log queues a query that arrived over over from client at local at qt
// and its reply sent at rt (nil when none was). It copies both and never
// blocks: a full queue drops them.
func (l *Logger) Log(query, reply []byte, client, local netip.AddrPort, over Transport, qt, rt time.Time) {
	e := entry{query: append([]byte(nil), query...), client: client, local: local, over: over, qt: qt, rt: rt}
	if reply != nil {
		e.reply = append([]byte(nil), reply...)
	}
	l.put(e)
}

// LogSample queues a query XDP answered at t, sampled at one in every,
// and its reply; its messages carry "sample=1/every" as their extra
// field. It never blocks: a full queue drops them.
func (l *Logger) LogSample(query, reply []byte, client, local netip.AddrPort, t time.Time, every uint32) {
	l.put(entry{query: query, reply: reply, client: client, local: local, qt: t, rt: t, every: every})
}

func (l *Logger) put(e entry) {
	select {
	case l.queue <- e:
	default:
		if e.every > 0 {
			l.sampled[1].Add(1)
		} else {
			l.dropped.Add(1)
		}
	}
}

// Counters are the queries sent to the output and those dropped for a
// full queue, since the start.
func (l *Logger) Counters() (sent, dropped uint64) { return l.sent.Load(), l.dropped.Load() }

// SampleCounters are XDP's samples sent to the output and those dropped
// for a full queue, since the start.
func (l *Logger) SampleCounters() (sent, dropped uint64) {
	return l.sampled[0].Load(), l.sampled[1].Load()
}

// closeWait bounds how long Close waits for what is queued to be sent:
// the output retries a reader that is gone forever.
const closeWait = 2 * time.Second

// Close sends what is queued and closes the connection, waiting at most
// closeWait; it reports whether everything went out.
func (l *Logger) Close() bool {
	close(l.queue)
	done := make(chan struct{})
	go func() { l.done.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(closeWait):
		return false
	}
}

func (l *Logger) run() {
	ch := l.out.GetOutputChannel()
	for e := range l.queue {
		for _, m := range l.messages(&e) {
			b, err := proto.Marshal(m)
			if err != nil {
				continue // every field is set from valid values: never happens
			}
			ch <- b
		}
		if e.every > 0 {
			l.sampled[0].Add(1)
		} else {
			l.sent.Add(1)
		}
	}
	close(ch)
}

// messages are e's AUTH_QUERY and, when it was answered, AUTH_RESPONSE.
func (l *Logger) messages(e *entry) []*dt.Dnstap {
	family, proto := dt.SocketFamily_INET, dt.SocketProtocol_UDP
	if e.client.Addr().Unmap().Is6() {
		family = dt.SocketFamily_INET6
	}
	switch e.over {
	case TCP:
		proto = dt.SocketProtocol_TCP
	case TLS:
		proto = dt.SocketProtocol_DOT
	}
	base := func(t dt.Message_Type) *dt.Message {
		m := &dt.Message{Type: &t, SocketFamily: &family, SocketProtocol: &proto,
			QueryAddress: e.client.Addr().Unmap().AsSlice(), QueryPort: ptr(uint32(e.client.Port())),
			QueryTimeSec: ptr(uint64(e.qt.Unix())), QueryTimeNsec: ptr(uint32(e.qt.Nanosecond()))}
		if e.local.IsValid() {
			m.ResponseAddress, m.ResponsePort = e.local.Addr().Unmap().AsSlice(), ptr(uint32(e.local.Port()))
		}
		return m
	}
	q := base(dt.Message_AUTH_QUERY)
	q.QueryMessage = e.query
	out := []*dt.Dnstap{l.wrap(q, e.every)}
	if e.reply != nil {
		r := base(dt.Message_AUTH_RESPONSE)
		r.QueryMessage = e.query
		r.ResponseMessage = e.reply
		r.ResponseTimeSec, r.ResponseTimeNsec = ptr(uint64(e.rt.Unix())), ptr(uint32(e.rt.Nanosecond()))
		out = append(out, l.wrap(r, e.every))
	}
	return out
}

// wrap makes m a dnstap frame; a sample of XDP's, at one in every, says
// so in the extra field, which dnstap leaves to the sender.
func (l *Logger) wrap(m *dt.Message, every uint32) *dt.Dnstap {
	t := dt.Dnstap_MESSAGE
	d := &dt.Dnstap{Identity: l.identity, Version: l.version, Type: &t, Message: m}
	if every > 0 {
		d.Extra = []byte("sample=1/" + strconv.FormatUint(uint64(every), 10))
	}
	return d
}

func ptr[T any](v T) *T { return &v }
