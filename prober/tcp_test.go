package prober

import (
	"fmt"
	"os"
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
