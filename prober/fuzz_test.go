package prober

import (
	"reflect"
	"testing"
	"time"
)

// FuzzDecode gives the frame decoder arbitrary bytes. It never panics, and
// a frame it accepts encodes back to a frame of the same length that
// decodes to the same content: nothing a checker sends is read two ways.
func FuzzDecode(f *testing.F) {
	for _, fr := range []Frame{
		{},
		{Version: 7, ConfigHash: 0x5eed, Prober: "p1", Region: "eu", Entries: []Entry{{Index: 1, Seq: 3, Healthy: true, Latency: time.Millisecond}, {}}},
		{Prober: "a-prober-id-of-exactly-32-bytes!", Region: "a-region-name-of-exactly-32-byte", Entries: make([]Entry, 4)},
		{Entries: []Entry{{Index: 1 << 31, Seq: 1 << 63, Reason: ReasonTimeout}}},
	} {
		b, err := Encode(nil, &fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		if err := Decode(b, &fr); err != nil {
			return
		}
		if len(fr.Entries) != (len(b)-HeaderSize)/EntrySize {
			t.Fatalf("%d entries from %d bytes", len(fr.Entries), len(b))
		}
		again, err := Encode(nil, &fr)
		if err != nil {
			t.Fatalf("a decoded frame does not encode: %v", err)
		}
		if len(again) != len(b) {
			t.Fatalf("re-encoded to %d bytes from %d", len(again), len(b))
		}
		var back Frame
		if err := Decode(again, &back); err != nil {
			t.Fatalf("a re-encoded frame does not decode: %v", err)
		}
		if !reflect.DeepEqual(back, fr) {
			t.Fatalf("decoded %+v, re-encoded and decoded %+v", fr, back)
		}
	})
}
