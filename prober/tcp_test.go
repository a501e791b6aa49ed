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
// TIME_WAIT entry, even when the backend closes first.
func TestTCPLeavesNoTimeWait(t *testing.T) {
	ap := acceptor(t) // closes every connection at once
	for range 200 {
		if r := runCheck(t, nil, checkOf(TCP, ap)); !r.Healthy {
			t.Fatalf("check failed: %s %s", r.Reason, r.Detail)
		}
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("reading /proc/net/tcp: %v", err)
	}
	port := fmt.Sprintf(":%04X", ap.Port())
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "06" && (strings.HasSuffix(f[1], port) || strings.HasSuffix(f[2], port)) {
			n++
		}
	}
	if n > 0 {
		t.Errorf("%d connections to the backend in TIME_WAIT after 200 checks, want 0", n)
	}
}
