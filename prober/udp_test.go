package prober

import (
	"bytes"
	"net"
	"regexp"
	"testing"
)

// serveEcho answers every datagram with "echo: " and the datagram, except
// "quiet", which it ignores.
func serveEcho(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if bytes.Equal(buf[:n], []byte("quiet")) {
			continue
		}
		pc.WriteTo(append([]byte("echo: "), buf[:n]...), from)
	}
}

func TestUDP(t *testing.T) {
	pc := listenUDP(t, nil, "127.0.0.1:0")
	go serveEcho(pc)
	ap := addrPort(pc.LocalAddr())
	udp := func(payload, reply string) Spec {
		return checkOf(UDP, ap, func(c *Spec) { c.Payload, c.ExpectReply = payload, reply })
	}
	t.Run("any reply", func(t *testing.T) { expect(t, runCheck(t, nil, udp("ping", "")), true, ReasonOK, "") })
	t.Run("expected reply", func(t *testing.T) { expect(t, runCheck(t, nil, udp("ping", "echo: ping")), true, ReasonOK, "") })
	t.Run("other reply", func(t *testing.T) {
		expect(t, runCheck(t, nil, udp("ping", "pong")), false, ReasonReplyMismatch, "reply mismatch")
	})
	t.Run("regexp", func(t *testing.T) {
		c := checkOf(UDP, ap, func(c *Spec) { c.Payload, c.ExpectRegexp = "ping", regexp.MustCompile(`^echo: p[a-z]+$`) })
		expect(t, runCheck(t, nil, c), true, ReasonOK, "")
	})
	t.Run("regexp other reply", func(t *testing.T) {
		c := checkOf(UDP, ap, func(c *Spec) { c.Payload, c.ExpectRegexp = "ping", regexp.MustCompile(`^pong`) })
		expect(t, runCheck(t, nil, c), false, ReasonReplyMismatch, "reply mismatch")
	})
	t.Run("no reply", func(t *testing.T) { expect(t, runCheck(t, nil, udp("quiet", "")), false, ReasonTimeout, "timeout") })
	t.Run("port closed", func(t *testing.T) {
		closed := listenUDP(t, nil, "127.0.0.1:0")
		gone := addrPort(closed.LocalAddr())
		closed.Close()
		c := checkOf(UDP, gone, func(c *Spec) { c.Payload = "ping" })
		expect(t, runCheck(t, nil, c), false, ReasonRefused, "connection refused")
	})
}
