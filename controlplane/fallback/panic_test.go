package fallback

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// breakingRecords is the records of exampleView, but selecting boom
// panics, as a bug in the handler would.
type breakingRecords struct {
	*fakeRecords
	boom string
}

func (b breakingRecords) Select(name string, qtype uint16, q Query, into []netip.Addr) (Selection, bool) {
	if name == b.boom {
		panic("test: a record set that breaks the handler")
	}
	return b.fakeRecords.Select(name, qtype, q, into)
}

// panics counts Options.OnPanic's calls by where.
type panics struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *panics) observe(where string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[where]++
}

func (p *panics) count(where string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[where]
}

// logTo sends slog's default logger's records to a buffer for the test.
func logTo(t *testing.T) *syncBuffer {
	var b syncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&b, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &b
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startBreaking serves exampleView with web.example.test.'s selection
// panicking, on loopback.
func startBreaking(t *testing.T) (*testServer, *panics) {
	v, recs := exampleView(t)
	v.Records = breakingRecords{fakeRecords: recs, boom: "web.example.test."}
	p := &panics{n: map[string]int{}}
	return startWith(t, v, Options{OnPanic: p.observe}), p
}

// TestPanicCostsOneDatagram: a datagram whose answer panics goes
// unanswered, the panic is counted and logged with its stack, and the
// next datagram on the same socket is answered.
func TestPanicCostsOneDatagram(t *testing.T) {
	log := logTo(t)
	ts, p := startBreaking(t)
	c, err := net.Dial("udp", ts.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	boom := query("web.example.test.", dns.TypeA)
	boom.Id = 1
	fine := query("static.example.test.", dns.TypeA)
	fine.Id = 2
	for _, m := range []*dns.Msg{boom, fine} {
		if _, err := c.Write(pack(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, dns.MaxMsgSize)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply after the query that panicked: %v", err)
	}
	var r dns.Msg
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	if r.Id != fine.Id || len(r.Answer) == 0 {
		t.Fatalf("first reply: id %d with %d answers, want the answer to %d; the query that panicked has none", r.Id, len(r.Answer), fine.Id)
	}
	waitFor(t, "the panic counted", 5*time.Second, func() bool { return p.count("udp") == 1 })
	if n := p.count("tcp"); n != 0 {
		t.Errorf("%d tcp panics counted, want 0", n)
	}
	out := log.String()
	for _, want := range []string{"where=udp", "breakingRecords", "goroutine "} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	// The next one on the same socket, and the loop's buffers reused
	// after the panic, answer right.
	fine.Id = 3
	if _, err := c.Write(pack(t, fine)); err != nil {
		t.Fatal(err)
	}
	if n, err = c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if err := r.Unpack(buf[:n]); err != nil || r.Id != fine.Id || len(r.Answer) == 0 {
		t.Fatalf("reply %d with %d answers, %v; want the answer to %d", r.Id, len(r.Answer), err, fine.Id)
	}
}

// TestPanicCostsOneConnection: a TCP query whose answer panics closes its
// connection, the panic is counted and logged, and a new connection is
// answered.
func TestPanicCostsOneConnection(t *testing.T) {
	log := logTo(t)
	ts, p := startBreaking(t)
	c, err := net.Dial("tcp", ts.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := query("web.example.test.", dns.TypeA)
	raw := pack(t, m)
	if _, err := c.Write(append([]byte{byte(len(raw) >> 8), byte(len(raw))}, raw...)); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(c, 5*time.Second) {
		t.Fatal("the connection whose query panicked stayed open")
	}
	waitFor(t, "the panic counted", 5*time.Second, func() bool { return p.count("tcp") == 1 })
	if n := p.count("udp"); n != 0 {
		t.Errorf("%d udp panics counted, want 0", n)
	}
	if out := log.String(); !strings.Contains(out, "where=tcp") || !strings.Contains(out, "breakingRecords") {
		t.Errorf("the log lacks the panic and its stack:\n%s", out)
	}
	c, err = net.Dial("tcp", ts.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask(t, c, 7)
}
