package transport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/transport"
)

// FuzzDecodeState gives the state-change decoder arbitrary messages. It
// never panics, and a message it accepts encodes back to one that
// decodes the same.
func FuzzDecodeState(f *testing.F) {
	for _, c := range []transport.StateChange{
		{Kind: transport.StateAdmin, Value: 2, Check: "web1"},
		{Kind: transport.StateExternal, Value: 1, Check: "deploy"},
		{Kind: transport.StateAdmin, Check: string(make([]byte, transport.MaxStateID))},
		{Kind: transport.StateShift, Value: 1, Check: "r1", Reason: "INC-1: packet loss", Duration: 30 * time.Minute},
		{Kind: transport.StateShift, Check: "eu-west"},
	} {
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(make([]byte, transport.StateSize-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := transport.DecodeState(b)
		if err != nil {
			return
		}
		again, err := s.Encode()
		if err != nil {
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		s2, err := transport.DecodeState(again)
		if err != nil || s2 != s {
			t.Fatalf("decoded %+v, re-encoded and decoded %+v (%v)", s, s2, err)
		}
	})
}

// TestShiftState: a shift's region, reason and duration travel in the
// fixed-size message and come back as sent; what does not fit is
// refused when sending.
func TestShiftState(t *testing.T) {
	for _, c := range []struct {
		name string
		s    transport.StateChange
		err  string
	}{
		{"shift", transport.StateChange{Kind: transport.StateShift, Value: 1, Check: "r1", Reason: "INC-1: packet loss", Duration: 72 * time.Hour}, ""},
		{"cancel", transport.StateChange{Kind: transport.StateShift, Check: "r1"}, ""},
		{"fills the message", transport.StateChange{Kind: transport.StateShift, Value: 1, Check: "r1", Reason: strings.Repeat("x", transport.MaxShiftText-2), Duration: time.Second}, ""},
		{"too long", transport.StateChange{Kind: transport.StateShift, Value: 1, Check: "r1", Reason: strings.Repeat("x", transport.MaxShiftText-1), Duration: time.Second},
			`region "r1" and reason "` + strings.Repeat("x", transport.MaxShiftText-1) + `" are longer than the 80 bytes a state message holds`},
		{"not whole ms", transport.StateChange{Kind: transport.StateShift, Value: 1, Check: "r1", Duration: time.Second + 1}, "a shift of 1.000000001s is not whole milliseconds up to 2^32-1"},
		{"beyond 32 bits", transport.StateChange{Kind: transport.StateShift, Value: 1, Check: "r1", Duration: 50 * 24 * time.Hour}, "a shift of 1200h0m0s is not whole milliseconds up to 2^32-1"},
	} {
		b, err := c.s.Encode()
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || len(b) != transport.StateSize {
			t.Fatalf("%s: %d bytes, %v", c.name, len(b), err)
		}
		if got, err := transport.DecodeState(b); err != nil || got != c.s {
			t.Errorf("%s: decoded %+v (%v), want %+v", c.name, got, err, c.s)
		}
	}
}
