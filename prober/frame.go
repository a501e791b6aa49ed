package prober

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The result frame's binary format (README.md has the table). All integers
// are little endian.
const (
	FrameMagic  = 0x46504453 // "SDPF" in the first four bytes
	FrameFormat = 2          // bumped whenever the layout changes
	HeaderSize  = 96
	EntrySize   = 24
	MaxProberID = 32 // bytes of prober id the header holds
	MaxRegion   = 32 // bytes of region name the header holds
)

var zeros [max(MaxProberID, MaxRegion)]byte

// cstring is a zero-padded name field's text.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Frame is one prober's report for one frame period: the latest result of
// every check it runs, padded with zero entries to its capacity, so its size
// depends on the capacity alone.
type Frame struct {
	Version    uint64 // frame sequence: the frame period's slot number, so it increases across restarts
	ConfigHash uint64 // hash of the config the results were measured under
	Prober     string // prober id, at most MaxProberID bytes
	Region     string // the prober's region, at most MaxRegion bytes; "" for none
	Entries    []Entry
}

// Entry is one check's latest result. A padding entry is all zero; Seq 0
// also means "no result yet", so receivers skip entries with Seq 0.
type Entry struct {
	Index   uint32 // health-table entry
	Seq     uint64
	Healthy bool
	Reason  Reason
	Latency time.Duration // microsecond resolution on the wire
}

// FrameSize is the encoded size of a frame with capacity entries.
func FrameSize(capacity int) int { return HeaderSize + EntrySize*capacity }

// Encode appends f's encoding to dst and returns the extended buffer.
func Encode(dst []byte, f *Frame) ([]byte, error) {
	if len(f.Prober) > MaxProberID {
		return dst, fmt.Errorf("encoding frame: prober id %q is longer than %d bytes", f.Prober, MaxProberID)
	}
	if len(f.Region) > MaxRegion {
		return dst, fmt.Errorf("encoding frame: region %q is longer than %d bytes", f.Region, MaxRegion)
	}
	if uint64(len(f.Entries)) > math.MaxUint32 {
		return dst, fmt.Errorf("encoding frame: %d entries", len(f.Entries))
	}
	b := binary.LittleEndian
	dst = b.AppendUint32(dst, FrameMagic)
	dst = b.AppendUint16(dst, FrameFormat)
	dst = b.AppendUint16(dst, 0)
	dst = b.AppendUint32(dst, uint32(len(f.Entries)))
	dst = b.AppendUint32(dst, 0)
	dst = b.AppendUint64(dst, f.Version)
	dst = b.AppendUint64(dst, f.ConfigHash)
	dst = append(dst, f.Prober...)
	dst = append(dst, zeros[:MaxProberID-len(f.Prober)]...)
	dst = append(dst, f.Region...)
	dst = append(dst, zeros[:MaxRegion-len(f.Region)]...)
	for _, e := range f.Entries {
		dst = b.AppendUint32(dst, e.Index)
		dst = b.AppendUint32(dst, uint32(min(e.Latency.Microseconds(), math.MaxUint32)))
		dst = b.AppendUint64(dst, e.Seq)
		var healthy byte
		if e.Healthy {
			healthy = 1
		}
		dst = append(dst, healthy, byte(e.Reason), 0, 0, 0, 0, 0, 0)
	}
	return dst, nil
}

// ErrFrame marks a buffer that is not a frame this version can read.
var ErrFrame = errors.New("not a result frame")

// Decode reads a frame from b into f, reusing f.Entries' storage.
func Decode(b []byte, f *Frame) error {
	le := binary.LittleEndian
	if len(b) < HeaderSize || le.Uint32(b) != FrameMagic {
		return fmt.Errorf("decoding frame: %w: bad magic or %d bytes", ErrFrame, len(b))
	}
	if v := le.Uint16(b[4:]); v != FrameFormat {
		return fmt.Errorf("decoding frame: %w: format %d, want %d", ErrFrame, v, FrameFormat)
	}
	n := int(le.Uint32(b[8:]))
	if len(b) != FrameSize(n) {
		return fmt.Errorf("decoding frame: %w: %d bytes for %d entries, want %d", ErrFrame, len(b), n, FrameSize(n))
	}
	f.Version = le.Uint64(b[16:])
	f.ConfigHash = le.Uint64(b[24:])
	f.Prober = cstring(b[32:64])
	f.Region = cstring(b[64:HeaderSize])
	f.Entries = f.Entries[:0]
	for p := b[HeaderSize:]; len(p) > 0; p = p[EntrySize:] {
		f.Entries = append(f.Entries, Entry{
			Index:   le.Uint32(p),
			Latency: time.Duration(le.Uint32(p[4:])) * time.Microsecond,
			Seq:     le.Uint64(p[8:]),
			Healthy: p[16] != 0,
			Reason:  Reason(p[17]),
		})
	}
	return nil
}
