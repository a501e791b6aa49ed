package transport_test

import (
	"testing"

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
