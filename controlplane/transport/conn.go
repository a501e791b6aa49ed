package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// TLS names PEM files. On a client, CA verifies the servers and Cert/Key,
// when set, are presented to servers that ask for a client certificate. On
// an embedded server, Cert/Key are its certificate and CA verifies the
// other servers of the cluster (routes use mutual TLS).
type TLS struct {
	CA, Cert, Key string
}

func (t TLS) enabled() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

// Options configure a connection.
type Options struct {
	URLs         []string // NATS servers; any one is enough, the others are learned
	ID           string   // host id: the sender of everything this connection publishes
	Cell         string   // the host's cell, in the subjects of the frames and tables it publishes
	Roles        []Role   // named in the connection's name, which the servers' monitoring shows
	NKeySeedFile string   // the host's NKey seed: its identity and so its permissions
	TLS          TLS

	// ChunkSize is the most payload bytes one message carries. 0 uses the
	// connected server's max_payload less the chunk header.
	ChunkSize int
}

// PendingBytes is how many bytes of received messages one subscription may
// hold before the client drops messages: a fleet of probers sends frames of
// up to 1.5 MiB each at the same moment every period.
const PendingBytes = 256 << 20

// Conn is a host's connection to the fleet's NATS servers. It reconnects
// forever: a fleet host never gives up on the fleet. Its methods are safe
// for concurrent use.
type Conn struct {
	nc     *nats.Conn
	id     string
	chunk  int
	subj   [KindState + 1]string
	events string // this host's events subject
	log    *limiter

	mu  sync.Mutex // guards buf
	buf []byte     // one chunk, reused

	disconnects, reconnects, permission, slow, asyncErrs atomic.Uint64
}

// ConnCounters count the connection's events.
type ConnCounters struct {
	Disconnects      uint64
	Reconnects       uint64
	PermissionErrors uint64 // publishes or subscriptions the server refused
	SlowConsumers    uint64 // times a subscription fell behind and lost messages
	OtherErrors      uint64 // other asynchronous errors the server reported
}

// Connect starts connecting to opts.URLs and returns at once: the
// connection keeps trying, and reconnects after every loss, until Close.
// WaitConnected waits for it.
func Connect(opts Options) (*Conn, error) {
	if err := ValidSenderID(opts.ID); err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	if err := ValidCell(opts.Cell); err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	if len(opts.URLs) == 0 {
		return nil, errors.New("connecting to nats: no server urls")
	}
	c := &Conn{id: opts.ID, chunk: opts.ChunkSize, log: newLimiter(LogEvery)}
	for k := KindFrame; k <= KindState; k++ {
		c.subj[k] = Subject(k, opts.Cell, opts.ID)
	}
	c.events = EventsSubject(opts.Cell, opts.ID)
	roles := make([]string, len(opts.Roles))
	for i, r := range opts.Roles {
		roles[i] = string(r)
	}
	no := []nats.Option{
		nats.Name(fmt.Sprintf("steadydns %s (%s)", opts.ID, strings.Join(roles, ","))),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		// By default a client stops after the same authorization error
		// twice; a host whose key is added later must then get in.
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(time.Second),
		// Messages are sent every period, so one held back during a
		// disconnection is stale when it finally goes: fail it instead.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(nc *nats.Conn) {
			slog.Info("nats connected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.disconnects.Add(1)
			slog.Warn("nats disconnected", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.reconnects.Add(1)
			slog.Info("nats reconnected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			c.log.warn("reconnect", "nats connection attempt", "error", err)
		}),
		nats.ErrorHandler(c.asyncError),
		// Replies come to this host's own inbox, the only one it may read.
		nats.CustomInboxPrefix(InboxPrefix(opts.ID)),
	}
	if opts.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("reading nkey seed: %w", err)
		}
		no = append(no, o)
	}
	if opts.TLS.CA != "" {
		no = append(no, nats.RootCAs(opts.TLS.CA))
	}
	if opts.TLS.Cert != "" || opts.TLS.Key != "" {
		no = append(no, nats.ClientCert(opts.TLS.Cert, opts.TLS.Key))
	}
	nc, err := nats.Connect(strings.Join(opts.URLs, ","), no...)
	if err != nil {
		return nil, fmt.Errorf("connecting to nats: %w", err)
	}
	c.nc = nc
	return c, nil
}

func (c *Conn) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	subj := ""
	if sub != nil {
		subj = sub.Subject
	}
	switch {
	case errors.Is(err, nats.ErrPermissionViolation):
		c.permission.Add(1)
		c.log.warn("permission", "nats refused an operation", "subject", subj, "error", err)
	case errors.Is(err, nats.ErrSlowConsumer):
		c.slow.Add(1)
		c.log.warn("slow", "nats subscription fell behind, messages lost", "subject", subj)
	default:
		c.asyncErrs.Add(1)
		c.log.warn("async", "nats error", "subject", subj, "error", err)
	}
}

// ID is the host id this connection publishes as.
func (c *Conn) ID() string { return c.id }

// Connected reports whether the connection is up now.
func (c *Conn) Connected() bool { return c.nc.IsConnected() }

// WaitConnected waits until the connection is up or ctx is done.
func (c *Conn) WaitConnected(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.nc.IsConnected() {
		select {
		case <-ctx.Done():
			if err := c.nc.LastError(); err != nil {
				return fmt.Errorf("waiting for nats: %w (last error: %w)", ctx.Err(), err)
			}
			return fmt.Errorf("waiting for nats: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Flush waits until the server has processed everything sent so far: a
// subscription made before Flush returns receives every later message.
func (c *Conn) Flush(ctx context.Context) error {
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flushing nats connection: %w", err)
	}
	return nil
}

// Counters returns a snapshot of the connection's counters.
func (c *Conn) Counters() ConnCounters {
	return ConnCounters{
		Disconnects: c.disconnects.Load(), Reconnects: c.reconnects.Load(),
		PermissionErrors: c.permission.Load(), SlowConsumers: c.slow.Load(), OtherErrors: c.asyncErrs.Load(),
	}
}

// Close closes the connection; its subscriptions end.
func (c *Conn) Close() { c.nc.Close() }

// MaxChunk is the most payload bytes one message carries now: ChunkSize,
// capped by the server's max_payload less the header. It is 0 until a
// server has been reached.
func (c *Conn) MaxChunk() int {
	limit := int(c.nc.MaxPayload()) - HeaderSize
	if limit <= 0 {
		return 0
	}
	if c.chunk > 0 && c.chunk < limit {
		return c.chunk
	}
	return limit
}

// ErrNotConnected is returned by Publish while the connection is down.
var ErrNotConnected = errors.New("not connected")

// Publish sends payload, the message of kind for push slot slot made under
// config hash hash, as this host. A payload larger than MaxChunk goes as
// several chunks of equal size (Split), so every payload of a given length
// costs the same messages. It fails, rather than queueing, while the
// connection is down; a refusal by the server arrives later and is counted
// in PermissionErrors.
func (c *Conn) Publish(kind Kind, slot, hash uint64, payload []byte) error {
	if !kind.valid() {
		return fmt.Errorf("publishing: unknown kind %d", kind)
	}
	if len(payload) > MaxMessage {
		return fmt.Errorf("publishing %s: %d bytes exceed %d", kind, len(payload), MaxMessage)
	}
	limit := c.MaxChunk()
	if limit == 0 || !c.nc.IsConnected() {
		return fmt.Errorf("publishing %s: %w", kind, ErrNotConnected)
	}
	if n, _ := Split(len(payload), limit); n > MaxChunks {
		return fmt.Errorf("publishing %s: %d bytes take %d chunks of %d, more than the %d a receiver takes", kind, len(payload), n, limit, MaxChunks)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	c.buf, err = encodeChunks(c.buf, kind, slot, hash, c.id, payload, limit, func(i, n int, chunk []byte) error {
		// nats copies chunk into its write buffer before returning.
		if err := c.nc.Publish(c.subj[kind], chunk); err != nil {
			return fmt.Errorf("publishing %s chunk %d of %d: %w", kind, i+1, n, err)
		}
		return nil
	})
	return err
}

// Subscription receives one kind's messages from every sender.
type Subscription struct {
	sub *nats.Subscription
	r   *Reassembler
}

// Subscribe receives every sender's messages of kind in cell (AllCells:
// in every cell; ignored for state changes, which have no cell): fn gets
// each payload once all its chunks have arrived and its checksum matches,
// on one goroutine, one message at a time, if filter lets its chunks in.
func (c *Conn) Subscribe(kind Kind, cell string, filter Filter, fn func(Message)) (*Subscription, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("subscribing: unknown kind %d", kind)
	}
	if kind.celled() && cell != AllCells {
		if err := ValidCell(cell); err != nil {
			return nil, fmt.Errorf("subscribing: %w", err)
		}
	}
	subject := SubjectAll(kind, cell)
	r := NewReassembler(kind, filter, fn)
	sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) { r.Add(m.Subject, m.Data) })
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(-1, PendingBytes); err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subject, errors.Join(err, sub.Unsubscribe()))
	}
	return &Subscription{sub: sub, r: r}, nil
}

// Counters returns the reassembler's counters, with Dropped: messages the
// client discarded because fn fell behind.
func (s *Subscription) Counters() Counters {
	n := s.r.Counters()
	if d, err := s.sub.Dropped(); err == nil {
		n.Dropped = uint64(d)
	}
	return n
}

// Unsubscribe stops the subscription.
func (s *Subscription) Unsubscribe() error {
	if err := s.sub.Unsubscribe(); err != nil {
		return fmt.Errorf("unsubscribing from %s: %w", s.sub.Subject, err)
	}
	return nil
}

// Traffic counts what one connection carried, as its client or its server
// counts it: In is what the client received, Out what it sent.
type Traffic struct {
	Name                               string // the connection's name: "steadydns <id> (<roles>)"
	InMsgs, InBytes, OutMsgs, OutBytes uint64
}

// Traffic returns what this connection has sent and received so far,
// protocol overhead excluded: payload bytes only, so a fixed-size message
// counts the same every period.
func (c *Conn) Traffic() Traffic {
	s := c.nc.Stats()
	return Traffic{Name: c.nc.Opts.Name, InMsgs: s.InMsgs, InBytes: s.InBytes, OutMsgs: s.OutMsgs, OutBytes: s.OutBytes}
}
