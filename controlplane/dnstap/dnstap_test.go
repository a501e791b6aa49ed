package dnstap_test

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	dt "github.com/dnstap/golang-dnstap"
	"google.golang.org/protobuf/proto"

	"github.com/steadydns/steadydns/controlplane/dnstap"
)

// TestDropsWithoutReader: with no reader the queue fills and the rest is
// dropped and counted, while Log returns at once.
func TestDropsWithoutReader(t *testing.T) {
	l, err := dnstap.Open(dnstap.Config{Socket: filepath.Join(t.TempDir(), "none.sock")}, "h1", "test")
	if err != nil {
		t.Fatal(err)
	}
	q := []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}
	client, local := netip.MustParseAddrPort("198.18.0.1:5300"), netip.MustParseAddrPort("198.18.0.2:53")
	const n = 3 * dnstap.QueueSize
	for range n {
		l.Log(q, q, client, local, dnstap.UDP, time.Now(), time.Now())
	}
	sent, dropped := l.Counters()
	if dropped < n-dnstap.QueueSize-64 || sent+dropped > n {
		t.Errorf("sent %d, dropped %d of %d: want all but the queue's and the output's room dropped", sent, dropped, n)
	}
	l.LogSample(q, q, client, local, time.Now(), 100)
	if _, dropped := l.SampleCounters(); dropped != 1 {
		t.Errorf("%d samples dropped into a full queue, want 1", dropped)
	}
	if l.Close() {
		t.Error("Close reports everything sent, with no reader")
	}
}

// TestOpenErrors: a config without a place, or with a TCP address that
// does not resolve, is refused.
func TestOpenErrors(t *testing.T) {
	for _, c := range []dnstap.Config{{}, {TCP: "198.18.0.10"}} {
		if l, err := dnstap.Open(c, "h1", "test"); err == nil {
			l.Close()
			t.Errorf("%+v opened, want an error", c)
		}
	}
}

// TestSampleMarked: through the Go library's reader, a sample of XDP's
// carries "sample=1/N" in its messages' extra field, with the query, the
// reply, the addresses and one time for both; a fallback query carries
// none, and its transport: UDP, TCP or DOT. Each is counted where it
// belongs.
func TestSampleMarked(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tap.sock")
	in, err := dt.NewFrameStreamSockInputFromPath(sock)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan []byte, 16)
	go in.ReadInto(frames)
	l, err := dnstap.Open(dnstap.Config{Socket: sock}, "h1", "test")
	if err != nil {
		t.Fatal(err)
	}
	q, r := []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}, []byte{0, 1, 0x84, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}
	client, local := netip.MustParseAddrPort("[fd53::1]:5300"), netip.MustParseAddrPort("[fd53::2]:53")
	at := time.Unix(1700000000, 123456789)
	l.LogSample(q, r, client, local, at, 100)
	l.Log(q, r, client, local, dnstap.UDP, at, at)
	l.Log(q, r, client, local, dnstap.TCP, at, at)
	l.Log(q, r, client, local, dnstap.TLS, at, at)
	udp, tcp, dot := dt.SocketProtocol_UDP, dt.SocketProtocol_TCP, dt.SocketProtocol_DOT
	want := []struct {
		typ   dt.Message_Type
		extra string
		proto dt.SocketProtocol
	}{
		{dt.Message_AUTH_QUERY, "sample=1/100", udp}, {dt.Message_AUTH_RESPONSE, "sample=1/100", udp},
		{dt.Message_AUTH_QUERY, "", udp}, {dt.Message_AUTH_RESPONSE, "", udp},
		{dt.Message_AUTH_QUERY, "", tcp}, {dt.Message_AUTH_RESPONSE, "", tcp},
		{dt.Message_AUTH_QUERY, "", dot}, {dt.Message_AUTH_RESPONSE, "", dot},
	}
	for i, w := range want {
		var b []byte
		select {
		case b = <-frames:
		case <-time.After(30 * time.Second):
			t.Fatalf("frame %d did not arrive", i)
		}
		var d dt.Dnstap
		if err := proto.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		m := d.GetMessage()
		if m.GetType() != w.typ || string(d.GetExtra()) != w.extra {
			t.Errorf("frame %d: %v extra %q, want %v %q", i, m.GetType(), d.GetExtra(), w.typ, w.extra)
		}
		if !bytes.Equal(m.GetQueryMessage(), q) || m.GetSocketFamily() != dt.SocketFamily_INET6 || m.GetSocketProtocol() != w.proto ||
			!bytes.Equal(m.GetQueryAddress(), client.Addr().AsSlice()) || m.GetQueryPort() != 5300 || !bytes.Equal(m.GetResponseAddress(), local.Addr().AsSlice()) ||
			m.GetQueryTimeSec() != 1700000000 || m.GetQueryTimeNsec() != 123456789 {
			t.Errorf("frame %d: %v", i, m)
		}
		if w.typ == dt.Message_AUTH_RESPONSE && (!bytes.Equal(m.GetResponseMessage(), r) || m.GetResponseTimeNsec() != 123456789) {
			t.Errorf("frame %d: response %x at %d ns, want %x at 123456789", i, m.GetResponseMessage(), m.GetResponseTimeNsec(), r)
		}
	}
	if !l.Close() {
		t.Error("Close reports queries left unsent")
	}
	if sent, dropped := l.SampleCounters(); sent != 1 || dropped != 0 {
		t.Errorf("samples sent %d, dropped %d; want 1, 0", sent, dropped)
	}
	if sent, dropped := l.Counters(); sent != 3 || dropped != 0 {
		t.Errorf("fallback queries sent %d, dropped %d; want 3, 0", sent, dropped)
	}
}
