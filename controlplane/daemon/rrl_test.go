package daemon_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/internal/packet"
	"github.com/steadydns/steadydns/testenv"
)

// rrlRate is the limit of the tests: low, so a flood at 10× it is easy to
// send, and a burst of queries sent at once is over it whatever the
// machine's load.
const rrlRate = 10

// rrlConfig is configFile with server.rrl on: 198.18.7.0/24 exempt.
func rrlConfig(link, pins string) string {
	return strings.Replace(fmt.Sprintf(configFile, link, "native", pins), "  rrl: {rate: 0}\n",
		fmt.Sprintf("  rrl:\n    rate: %d\n    slip: 2\n    exempt: [198.18.7.0/24]\n", rrlRate), 1)
}

// addClientAddr gives the client host a second IPv4 address in another
// /24, and the edge a route and neighbour entry back to it.
func addClientAddr(t *testing.T, env *testenv.Env, a string) {
	t.Helper()
	for _, c := range [][]string{
		{"client", "ip", "addr", "add", a + "/32", "dev", env.Client.Link},
		{"edge", "ip", "route", "add", a + "/32", "dev", env.Edge.Link},
		{"edge", "ip", "neigh", "replace", a, "lladdr", env.Client.MAC.String(), "dev", env.Edge.Link, "nud", "permanent"},
	} {
		h := env.Client
		if c[0] == "edge" {
			h = env.Edge
		}
		if out, err := h.Command(c[1], c[2:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c[1:], " "), err, out)
		}
	}
}

// burst sends every query at once from local over one UDP socket in the
// client host, then collects replies until each query has one or a second
// has passed: how many carried records and how many were slipped (TC=1,
// none).
func burst(t *testing.T, env *testenv.Env, local, server string, msgs []*dns.Msg) (answered, slipped int) {
	t.Helper()
	err := env.Client.Do(func() error {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(local), 0)))
		if err != nil {
			return err
		}
		defer c.Close()
		dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(server))
		for i, m := range msgs {
			m.Id = uint16(i + 1)
			b, err := m.Pack()
			if err != nil {
				return err
			}
			if _, err := c.WriteToUDP(b, dst); err != nil {
				return err
			}
		}
		buf := make([]byte, 65535)
		c.SetReadDeadline(time.Now().Add(time.Second))
		for answered+slipped < len(msgs) {
			n, err := c.Read(buf)
			if err != nil {
				return nil // the deadline: every reply that comes is in
			}
			var r dns.Msg
			if err := r.Unpack(buf[:n]); err != nil {
				return fmt.Errorf("unpacking a reply: %w", err)
			}
			switch {
			case r.Truncated && len(r.Answer) == 0:
				slipped++
			case len(r.Answer) > 0:
				answered++
			default:
				return fmt.Errorf("a reply neither answered nor slipped:\n%v", &r)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return answered, slipped
}

func queries(n int, name string, qtype uint16) []*dns.Msg {
	var ms []*dns.Msg
	for range n {
		ms = append(ms, q(name, qtype))
	}
	return ms
}

// TestRRLFlood floods the edge with queries from spoofed sources in the
// client's /24, written as raw frames at 10× the limit: what comes back is
// no more bytes than went in, and no more answers than the limit allows.
// Meanwhile a client in another prefix gets every answer; then the real
// client in the flooded prefix, limited, gets a slipped reply and its
// answer over TCP; and an exempt prefix is never limited.
func TestRRLFlood(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	e := serve(t, env, rrlConfig)
	addClientAddr(t, env, "198.18.6.1")
	addClientAddr(t, env, "198.18.7.1")

	query, err := q("www.example.test.", dns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	const flood, seconds = 10 * rrlRate, 3
	var in, out, answers int
	other := make(chan [2]int, 1)
	err = env.Client.Do(func() error {
		ifi, err := net.InterfaceByName(env.Client.Link)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("opening a packet socket: %w", err)
		}
		defer unix.Close(fd)
		ll := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
		if err := unix.Bind(fd, ll); err != nil {
			return fmt.Errorf("binding the packet socket: %w", err)
		}
		// The replies to the spoofed sources reach the client's link,
		// whose stack drops them: the packet socket sees them first.
		done := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 2048)
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
			quiet := 0
			for quiet < 10 {
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					quiet++
					continue
				}
				quiet = 0
				if r, err := packet.Parse(buf[:n]); err == nil && r.Src.Port() == 53 && spoofed(r.Dst.Addr()) {
					out += n
					var m dns.Msg
					if m.Unpack(r.Payload) == nil && len(m.Answer) > 0 {
						answers++
					}
				}
			}
		}()
		go func() {
			// The other prefix asks at half the rate during the flood.
			var a, s int
			for range seconds * rrlRate / 2 {
				r := tryUDP(env, "198.18.6.1", "198.18.0.2:53", q("www.example.test.", dns.TypeA))
				switch {
				case r != nil && r.Truncated:
					s++
				case r != nil && len(r.Answer) > 0:
					a++
				}
				time.Sleep(2 * time.Second / rrlRate)
			}
			other <- [2]int{a, s}
		}()
		for i := range flood * seconds {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(100 + i%100)}), uint16(20000+i))
			f := packet.Build(packet.Frame{Src: src, Dst: netip.MustParseAddrPort("198.18.0.2:53"),
				SrcMAC: [6]byte(env.Client.MAC), DstMAC: [6]byte(env.Edge.MAC), Payload: query, Checksum: packet.Full})
			if err := unix.Sendto(fd, f, 0, ll); err != nil {
				return fmt.Errorf("sending a spoofed query: %w", err)
			}
			in += len(f)
			time.Sleep(time.Second / flood)
		}
		<-done
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d bytes in, %d bytes out, %d answers", in, out, answers)
	if out > in {
		t.Errorf("%d bytes out for %d bytes in", out, in)
	}
	if out == 0 {
		t.Errorf("no reply to the flood at all, want the limit's answers and slipped replies")
	}
	// A burst of rate, then rate a second; a little more for the time the
	// flood took to start.
	if max := rrlRate * (seconds + 2); answers > max {
		t.Errorf("%d answers to the flood in %d s, want at most %d", answers, seconds, max)
	}
	o := <-other
	if want := seconds * rrlRate / 2; o[0] != want {
		t.Errorf("the client in another prefix got %d answers and %d slipped replies of %d queries, want every answer", o[0], o[1], want)
	}
	xdp, err := e.d.XDPOutcomes()
	if err != nil {
		t.Fatal(err)
	}
	if xdp["rrl_dropped"] == 0 || xdp["rrl_slipped"] == 0 {
		t.Errorf("xdp counted %d dropped and %d slipped, want both", xdp["rrl_dropped"], xdp["rrl_slipped"])
	}

	// The real client in the flooded prefix: limited, slipped, answered
	// over TCP.
	var tc *dns.Msg
	for range 4 {
		if r := tryUDP(env, "198.18.0.1", "198.18.0.2:53", q("www.example.test.", dns.TypeA)); r != nil && r.Truncated {
			tc = r
			break
		}
	}
	if tc == nil {
		t.Fatal("no slipped reply in 4 queries from the limited prefix")
	}
	if len(tc.Answer) != 0 || len(tc.Question) != 1 || tc.Question[0].Name != "www.example.test." {
		t.Errorf("slipped reply:\n%v\nwant the question alone with TC", tc)
	}
	if r := e.ask(t, "tcp", "198.18.0.2:53", q("www.example.test.", dns.TypeA)); len(addrs(r)) == 0 {
		t.Errorf("the retry over TCP got\n%v\nwant the answer", r)
	}

	// An exempt prefix: every one of a burst at 3× the limit answered.
	if a, s := burst(t, env, "198.18.7.1", "198.18.0.2:53", queries(3*rrlRate, "www.example.test.", dns.TypeA)); a != 3*rrlRate {
		t.Errorf("exempt client: %d answered, %d slipped of %d", a, s, 3*rrlRate)
	}
}

// TestRRLMixedPaths: queries the XDP program answers and queries it
// passes to the fallback (the same question, padded past what XDP reads)
// draw on one budget. The fallback answers 3 and XDP 4 of a limit of 10;
// of a burst of 10 more, both kinds, only the 3 left are answered, where
// a budget per path would answer all 10.
func TestRRLMixedPaths(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	e := serve(t, env, rrlConfig)
	plain := func() *dns.Msg { return q("www.example.test.", dns.TypeAAAA) }
	padded := func() *dns.Msg {
		m := plain()
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, 1100)})
		return m
	}
	n := func(k int, f func() *dns.Msg) []*dns.Msg {
		var ms []*dns.Msg
		for range k {
			ms = append(ms, f())
		}
		return ms
	}
	const server = "[fd53::2]:53"
	x0, f0 := e.paths(t)
	if a, _ := burst(t, env, "fd53::1", server, n(3, padded)); a != 3 {
		t.Fatalf("%d of 3 padded queries answered, want all, within the limit", a)
	}
	if a, _ := burst(t, env, "fd53::1", server, n(4, plain)); a != 4 {
		t.Fatalf("%d of 4 queries answered, want all, within the limit", a)
	}
	x1, f1 := e.paths(t)
	if x1-x0 != 4 || f1-f0 != 3 {
		t.Fatalf("xdp answered %d and the fallback %d, want 4 and 3", x1-x0, f1-f0)
	}
	answered, slipped := burst(t, env, "fd53::1", server, append(n(5, plain), n(5, padded)...))
	t.Logf("of 10 more: %d answered, %d slipped", answered, slipped)
	// One more than the 3 left for the credit that accrues meanwhile.
	if answered > 4 {
		t.Errorf("%d of 10 answered after 7 of a limit of %d, want at most 4: the paths do not share the budget", answered, rrlRate)
	}
	if slipped == 0 {
		t.Errorf("no reply slipped")
	}
	if n := e.d.Metrics().FallbackCount("rrl_slipped") + e.d.Metrics().FallbackCount("rrl_dropped"); n == 0 {
		t.Errorf("the fallback limited none of the padded queries")
	}
}

// tryUDP sends one query from local in the client host and returns the
// reply, or nil when none came within half a second (dropped).
func tryUDP(env *testenv.Env, local, server string, m *dns.Msg) *dns.Msg {
	var r *dns.Msg
	env.Client.Do(func() error {
		c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond,
			Dialer: &net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(local), 0))}}
		r, _, _ = c.Exchange(m, server)
		return nil
	})
	return r
}

func spoofed(a netip.Addr) bool {
	b := a.As4()
	return a.Is4() && b[0] == 198 && b[1] == 18 && b[2] == 0 && b[3] >= 100 && b[3] < 200
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
