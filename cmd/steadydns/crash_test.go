package main

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/testenv"
)

// crashConfig turns rate limiting off: startLoad's clients ask one name
// without pause and every query must be answered.
const crashConfig = `server:
  interfaces: [%s]
  xdp_mode: generic
  listen: ["198.18.0.2:53"]
  bpffs: %s
  state_dir: %s
  rrl: {rate: 0}
zones:
  - origin: example.test.
    file: example.test.zone
health_checks:
  web1: { type: tcp, target: 198.18.1.1, port: 80, interval: 200ms, timeout: 100ms }
records:
  - name: www.example.test.
    type: A
    answers: [{value: 198.18.1.1, check: web1}, {value: 198.18.1.2}]
aggregation:
  push_interval: 100ms
`

const crashZone = `$ORIGIN example.test.
$TTL 300
@ SOA ns hostmaster 1 3600 600 86400 60
@ NS ns
ns A 198.18.0.2
`

// TestCrashUnderLoad kills `steadydns serve` with SIGKILL while clients
// query without pause: XDP, pinned with its maps, answers every query
// before, during and after the crash, though nothing in userspace runs;
// and a new serve starts over what the dead one left.
func TestCrashUnderLoad(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	e := newEdgeHost(t, env, bin, crashConfig, map[string]string{"example.test.zone": crashZone})
	serve := func(name string) *exec.Cmd {
		cmd := e.serve(name)
		waitServing(t, env)
		return cmd
	}
	// web1's backend accepts, so both addresses are answered.
	var ln net.Listener
	if err := env.Backends[0].Do(func() (err error) {
		ln, err = net.Listen("tcp", "198.18.1.1:80")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	first := serve("first")

	l := startLoad(t, env, 4)
	time.Sleep(time.Second)
	before := l.snapshot()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := first.Wait()
	if ws, ok := first.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("serve ended with %v, want killed", err)
	}
	// Nothing listens any more: only XDP can answer now.
	if err := env.Client.Do(func() error {
		_, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion("www.example.test.", dns.TypeA), "198.18.0.2:53")
		if err == nil {
			return fmt.Errorf("a TCP query was answered after the kill")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	after := l.snapshot()
	l.stop()
	t.Logf("before the kill: %d answered, %d lost; after: %d answered, %d lost", before.answered, before.lost, after.answered-before.answered, after.lost-before.lost)
	// A query in flight at the kill counts after it: XDP answers it too.
	if before.answered == 0 || before.lost != 0 {
		t.Errorf("before the kill %d queries were answered with both addresses, %d not", before.answered, before.lost)
	}
	if after.answered-before.answered < 100 || after.lost != before.lost {
		t.Errorf("after the kill %d queries were answered with both addresses, %d not", after.answered-before.answered, after.lost-before.lost)
	}

	// A new serve starts over the pinned maps and link, the state file the
	// dead one wrote, and its sockets' ports.
	serve("second")
	var m dns.Msg
	if err := env.Client.Do(func() error {
		r, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion("www.example.test.", dns.TypeA), "198.18.0.2:53")
		if r != nil {
			m = *r
		}
		return err
	}); err != nil || len(m.Answer) == 0 {
		t.Errorf("the second serve's fallback: %v, answer %v", err, m.Answer)
	}
}

// waitServing waits until serve's API answers: it listens last.
func waitServing(t *testing.T, env *testenv.Env) {
	t.Helper()
	c := env.Edge.HTTPClient()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get("http://127.0.0.1:9153/api/v1/records")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// load is clients on the client host, each asking for www.example.test A
// over UDP without pause, counting the replies with both addresses as
// answered and the rest (none within a second, or another reply) as lost.
type load struct {
	answered, lost atomic.Int64
	done           chan struct{}
	wg             sync.WaitGroup
}

type counts struct{ answered, lost int64 }

func startLoad(t *testing.T, env *testenv.Env, clients int) *load {
	t.Helper()
	l := &load{done: make(chan struct{})}
	for i := range clients {
		var c net.Conn
		if err := env.Client.Do(func() (err error) {
			c, err = net.Dial("udp", "198.18.0.2:53")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer c.Close()
			buf := make([]byte, 512)
			for id := uint16(i) << 12; ; id++ {
				select {
				case <-l.done:
					return
				default:
				}
				q := new(dns.Msg).SetQuestion("www.example.test.", dns.TypeA)
				q.Id = id
				b, _ := q.Pack()
				if l.ask(c, b, buf, id) {
					l.answered.Add(1)
				} else {
					l.lost.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

// ask sends one query and reports whether its reply came, within a
// second, with both addresses.
func (l *load) ask(c net.Conn, q, buf []byte, id uint16) bool {
	if _, err := c.Write(q); err != nil {
		return false
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	for {
		n, err := c.Read(buf)
		if err != nil {
			return false
		}
		var r dns.Msg
		if r.Unpack(buf[:n]) != nil || r.Id != id {
			continue // a late reply to an earlier query
		}
		return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 2
	}
}

func (l *load) snapshot() counts { return counts{l.answered.Load(), l.lost.Load()} }

func (l *load) stop() {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.wg.Wait()
}
