package dnstap_test

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

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
		l.Log(q, q, client, local, false, time.Now(), time.Now())
	}
	sent, dropped := l.Counters()
	if dropped < n-dnstap.QueueSize-64 || sent+dropped > n {
		t.Errorf("sent %d, dropped %d of %d: want all but the queue's and the output's room dropped", sent, dropped, n)
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
