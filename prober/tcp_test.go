package prober

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestTCP(t *testing.T) {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ap := addrPort(ln.Addr())
	expect(t, runCheck(t, nil, checkOf(TCP, ap)), true, ReasonOK, "")
	ln.Close()
	expect(t, runCheck(t, nil, checkOf(TCP, ap)), false, ReasonRefused, "connection refused")
}

// serveLines answers a line protocol on ln: "PING" gets "+PONG", "QUIET"
// gets nothing while the connection stays open, "BYE" gets "+BYE" in two
// writes and a close, and any other line "-ERR unknown".
func serveLines(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				switch strings.TrimRight(line, "\r\n") {
				case "PING":
					fmt.Fprint(c, "+PONG\r\n")
				case "QUIET":
				case "BYE":
					fmt.Fprint(c, "+B")
					fmt.Fprint(c, "YE\r\n")
					return
				default:
					fmt.Fprint(c, "-ERR unknown\r\n")
				}
			}
		}()
	}
}

// TestTCPTalks: a tcp check with send and expect or expect_regexp passes
// only on the expected reply, and fails with reply_mismatch on another.
func TestTCPTalks(t *testing.T) {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	go serveLines(ln)
	ap := addrPort(ln.Addr())
	talk := func(send, want string, re string) Spec {
		return checkOf(TCP, ap, func(s *Spec) {
			s.Send, s.Expect = send, want
			if re != "" {
				s.ExpectRegexp = regexp.MustCompile(re)
			}
		})
	}
	for _, tc := range []struct {
		name, send, expect, re string
		healthy                bool
		reason                 Reason
		detail                 string
	}{
		{"expected reply", "PING\r\n", "+PONG", "", true, ReasonOK, ""},
		{"other reply", "HELLO\r\n", "+PONG", "", false, ReasonReplyMismatch, "reply mismatch"},
		{"regexp", "PING\r\n", "", `^\+P[A-Z]+\r\n$`, true, ReasonOK, ""},
		{"regexp other reply", "HELLO\r\n", "", `^\+`, false, ReasonReplyMismatch, "reply mismatch"},
		{"reply in pieces", "BYE\r\n", "+BYE", "", true, ReasonOK, ""},
		{"close without the reply", "BYE\r\n", "+PONG", "", false, ReasonReplyMismatch, "reply mismatch"},
		{"never answers", "QUIET\r\n", "+PONG", "", false, ReasonTimeout, "timeout"},
		{"send only", "QUIET\r\n", "", "", true, ReasonOK, ""},
		{"no reply to wait for", "", "+PONG", "", false, ReasonTimeout, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, runCheck(t, nil, talk(tc.send, tc.expect, tc.re)), tc.healthy, tc.reason, tc.detail)
		})
	}
}

// TestTCPBanner: with expect and no send, the check reads what the server
// says first, as SMTP or SSH servers do.
func TestTCPBanner(t *testing.T) {
	ln := listenTCP(t, nil, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "220 mail.example.test ESMTP\r\n")
			c.Close()
		}
	}()
	ap := addrPort(ln.Addr())
	banner := func(want string) Spec { return checkOf(TCP, ap, func(s *Spec) { s.Expect = want }) }
	expect(t, runCheck(t, nil, banner("220 ")), true, ReasonOK, "")
	expect(t, runCheck(t, nil, banner("421 ")), false, ReasonReplyMismatch, "reply mismatch")
}

// TestTCPLeavesNoTimeWait: checks end with RST, so neither end keeps a
// TIME_WAIT entry, even when the backend closes first. Only entries that
// appear during the checks count: the backend's port may also be the
// local port of another process's connection, closed before the test and
// still in TIME_WAIT, which other packages' tests running beside this one
// leave behind.
func TestTCPLeavesNoTimeWait(t *testing.T) {
	ap := acceptor(t) // closes every connection at once
	before := timeWaits(t, ap.Port())
	for range 200 {
		if r := runCheck(t, nil, checkOf(TCP, ap)); !r.Healthy {
			t.Fatalf("check failed: %s %s", r.Reason, r.Detail)
		}
	}
	n := 0
	for c := range timeWaits(t, ap.Port()) {
		if !before[c] {
			n++
		}
	}
	if n > 0 {
		t.Errorf("%d connections to the backend in TIME_WAIT after 200 checks, want 0", n)
	}
}

// timeWaits are the IPv4 TCP connections in TIME_WAIT (state 06) from or
// to 127.0.0.1 at port, as /proc/net/tcp writes their two ends.
func timeWaits(t *testing.T, port uint16) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatalf("reading /proc/net/tcp: %v", err)
	}
	end := fmt.Sprintf("0100007F:%04X", port)
	cs := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "06" && (f[1] == end || f[2] == end) {
			cs[f[1]+" "+f[2]] = true
		}
	}
	return cs
}
