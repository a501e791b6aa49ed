package prober

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	f := Frame{Version: 1 << 40, ConfigHash: 0xfeedface12345678, Prober: "prober-eu-1", Region: "eu-west", Entries: []Entry{
		{Index: 7, Seq: 1_700_000_000_123, Healthy: true, Reason: ReasonOK, Latency: 1234 * time.Microsecond},
		{Index: 65535, Seq: 9, Reason: ReasonStatus, Latency: 2 * time.Second},
		{}, // padding
	}}
	b, err := Encode(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != FrameSize(3) {
		t.Fatalf("encoded %d bytes, want %d", len(b), FrameSize(3))
	}
	var g Frame
	if err := Decode(b, &g); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Errorf("decoded\n%+v\nwant\n%+v", g, f)
	}
}

// TestFrameLayout pins the byte layout that README.md documents, so a
// change to it cannot go unnoticed by receivers.
func TestFrameLayout(t *testing.T) {
	f := Frame{Version: 0x0102030405060708, ConfigHash: 0x1112131415161718, Prober: "p1", Region: "eu", Entries: []Entry{
		{Index: 0x21222324, Seq: 0x3132333435363738, Healthy: true, Reason: ReasonBodyMismatch, Latency: 0x41424344 * time.Microsecond},
	}}
	b, err := Encode(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'S', 'D', 'P', 'F', 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
		8, 7, 6, 5, 4, 3, 2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
		'p', '1', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		'e', 'u', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x24, 0x23, 0x22, 0x21, 0x44, 0x43, 0x42, 0x41, 0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31,
		1, byte(ReasonBodyMismatch), 0, 0, 0, 0, 0, 0,
	}
	if !bytes.Equal(b, want) {
		t.Errorf("encoded\n% x\nwant\n% x", b, want)
	}
}

func TestFrameLatencySaturates(t *testing.T) {
	b, _ := Encode(nil, &Frame{Entries: []Entry{{Seq: 1, Latency: 100 * time.Hour}}})
	var f Frame
	if err := Decode(b, &f); err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(math.MaxUint32) * time.Microsecond; f.Entries[0].Latency != want {
		t.Errorf("latency %s, want the maximum %s", f.Entries[0].Latency, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(nil, &Frame{Prober: "p", Entries: make([]Entry, 2)})
	bad := func(edit func(b []byte) []byte) []byte { return edit(bytes.Clone(good)) }
	for name, b := range map[string][]byte{
		"empty":      nil,
		"short":      good[:HeaderSize-1],
		"magic":      bad(func(b []byte) []byte { b[0] = 'X'; return b }),
		"format":     bad(func(b []byte) []byte { b[4] = 1; return b }),
		"truncated":  good[:len(good)-1],
		"extra":      append(bytes.Clone(good), 0),
		"more count": bad(func(b []byte) []byte { b[8] = 3; return b }),
	} {
		if err := Decode(b, &Frame{}); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: Decode = %v, want ErrFrame", name, err)
		}
	}
	if _, err := Encode(nil, &Frame{Prober: "a prober id that is longer than 32 bytes"}); err == nil {
		t.Error("Encode accepted a 40-byte prober id")
	}
	if _, err := Encode(nil, &Frame{Prober: "p", Region: "a region name that is longer than 32 bytes"}); err == nil {
		t.Error("Encode accepted a 43-byte region")
	}
}

func probesAt(indexes ...uint32) map[string]Probe {
	ps := map[string]Probe{}
	for _, i := range indexes {
		ps[fmt.Sprint("c", len(ps))] = Probe{Index: i}
	}
	return ps
}

// TestFramerConstantSize: a frame is as big, and holds as many entries,
// with no checks as with the capacity all used.
func TestFramerConstantSize(t *testing.T) {
	const capacity = 1000
	empty, _ := NewFramer("p1", "", capacity)
	full, _ := NewFramer("p1", "", capacity)
	all := map[string]Probe{}
	for i := range capacity {
		all[fmt.Sprint("c", i)] = Probe{Index: uint32(i + 1)}
	}
	if err := full.Configure(42, all); err != nil {
		t.Fatal(err)
	}
	for i := range capacity {
		full.Record(Result{Index: uint32(i + 1), Seq: 5, Reason: ReasonTimeout, Latency: time.Second})
	}
	a, b := empty.AppendFrame(nil, 1), full.AppendFrame(nil, 1)
	if len(a) != len(b) || len(a) != FrameSize(capacity) {
		t.Errorf("frame sizes %d (empty) and %d (full), want both %d", len(a), len(b), FrameSize(capacity))
	}
	var fa, fb Frame
	if err := errors.Join(Decode(a, &fa), Decode(b, &fb)); err != nil {
		t.Fatal(err)
	}
	if len(fa.Entries) != capacity || len(fb.Entries) != capacity {
		t.Errorf("%d and %d entries, want %d", len(fa.Entries), len(fb.Entries), capacity)
	}
	for _, e := range fb.Entries {
		if e.Seq != 5 || e.Reason != ReasonTimeout {
			t.Fatalf("full frame has entry %+v", e)
		}
	}
	more := make([]uint32, capacity+1)
	for i := range more {
		more[i] = uint32(i + 1)
	}
	if err := full.Configure(42, probesAt(more...)); err == nil {
		t.Error("Configure accepted more checks than the capacity")
	}
}

func TestFramer(t *testing.T) {
	f, err := NewFramer("p1", "", 4)
	if err != nil {
		t.Fatal(err)
	}
	entries := func() []Entry {
		var fr Frame
		if err := Decode(f.AppendFrame(nil, 9), &fr); err != nil {
			t.Fatal(err)
		}
		if fr.Version != 9 || fr.Prober != "p1" {
			t.Errorf("frame version %d prober %q, want 9 p1", fr.Version, fr.Prober)
		}
		var used []Entry
		for _, e := range fr.Entries {
			if e.Seq != 0 {
				used = append(used, e)
			}
		}
		return used
	}
	if err := f.Configure(1, probesAt(10, 20)); err != nil {
		t.Fatal(err)
	}
	f.Record(Result{Index: 10, Seq: 3, Healthy: true, Reason: ReasonOK})
	f.Record(Result{Index: 10, Seq: 2, Reason: ReasonTimeout}) // older: ignored
	f.Record(Result{Index: 30, Seq: 4, Healthy: true})         // not configured: dropped
	if got := entries(); len(got) != 1 || got[0].Index != 10 || got[0].Seq != 3 || !got[0].Healthy {
		t.Errorf("entries %+v, want index 10 seq 3 healthy", got)
	}
	// Same config: results survive, removed checks go.
	if err := f.Configure(1, probesAt(10, 30)); err != nil {
		t.Fatal(err)
	}
	f.Record(Result{Index: 30, Seq: 4, Healthy: true})
	if got := entries(); len(got) != 2 {
		t.Errorf("entries %+v, want 10 and 30", got)
	}
	// A new config clears every result.
	if err := f.Configure(2, probesAt(10, 30)); err != nil {
		t.Fatal(err)
	}
	if got := entries(); len(got) != 0 {
		t.Errorf("entries %+v after a config change, want none", got)
	}
	if err := f.Configure(2, probesAt(0)); err == nil {
		t.Error("Configure accepted index 0, which padding uses")
	}
}

func TestFramerRun(t *testing.T) {
	f, _ := NewFramer("p1", "", 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const period = 50 * time.Millisecond
	var versions []uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx, period, func(b []byte) {
			var fr Frame
			if err := Decode(b, &fr); err != nil || len(b) != FrameSize(8) {
				t.Errorf("emitted %d bytes: %v", len(b), err)
			}
			versions = append(versions, fr.Version)
			if len(versions) == 4 {
				cancel()
			}
		})
	}()
	<-done
	for i := 1; i < len(versions); i++ {
		if versions[i] != versions[i-1]+1 {
			t.Errorf("versions %v, want consecutive period slots", versions)
		}
	}
	if now := uint64(time.Now().UnixNano() / int64(period)); versions[len(versions)-1] > now || versions[len(versions)-1] < now-1 {
		t.Errorf("last version %d, want the current slot %d", versions[len(versions)-1], now)
	}
}
