package loader

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/bpf"
)

// SampleQueryMax is the most of a query a sample keeps (bpf's
// SAMPLE_QUERY_MAX); a reply is kept whole.
const SampleQueryMax = int(bpf.SteadydnsLimitsSAMPLE_QUERY_MAX)

// sampleHead is the bytes of struct sample before its data.
const sampleHead = int(unsafe.Offsetof(bpf.SteadydnsSample{}.Data))

func setSample(vars *bpf.SteadydnsVariableSpecs, every uint32) error {
	if err := vars.SampleEvery.Set(every); err != nil {
		return fmt.Errorf("setting the sample rate: %w", err)
	}
	return nil
}

// Sample is one reply XDP sent, with the query it answered: what
// bpf/sample.h puts in the samples ring buffer.
type Sample struct {
	Time   time.Time // when the reply was sent
	Client netip.AddrPort
	Server netip.AddrPort
	// Query is the query's first SampleQueryMax bytes; QueryLen its
	// length.
	Query    []byte
	QueryLen int
	Reply    []byte
	Rcode    uint8
	Answers  uint16
	Every    uint32 // sampled at one in Every
}

// SampleReader reads the samples ring buffer. Read and Close may be
// called from different goroutines.
type SampleReader struct {
	r *ringbuf.Reader
	// boot is the wall clock less CLOCK_BOOTTIME, which the samples are
	// stamped with, taken when the reader opened.
	boot time.Time
}

// ReadSamples opens a reader of the samples the program writes while
// loaded with Options.SampleEvery set.
func (o *Objects) ReadSamples() (*SampleReader, error) {
	r, err := ringbuf.NewReader(o.Samples)
	if err != nil {
		return nil, fmt.Errorf("opening the samples ring buffer: %w", err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		r.Close()
		return nil, fmt.Errorf("reading the boot clock: %w", err)
	}
	return &SampleReader{r: r, boot: time.Now().Add(-time.Duration(ts.Nano()))}, nil
}

// ErrSamplesEnd is Read's error once the reader is closed, or flushed
// and what was in the ring read.
var ErrSamplesEnd = errors.New("no more samples: the reader is flushed or closed")

// SamplePoll is how often a Read waiting looks into the ring: the
// program wakes it only once the ring is a quarter full.
const SamplePoll = 100 * time.Millisecond

// Read waits for the next sample.
func (s *SampleReader) Read() (Sample, error) {
	for {
		s.r.SetDeadline(time.Now().Add(SamplePoll))
		rec, err := s.r.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) {
			return Sample{}, ErrSamplesEnd
		}
		if err != nil {
			return Sample{}, fmt.Errorf("reading a sample: %w", err)
		}
		if smp, ok := s.parse(rec.RawSample); ok {
			return smp, nil
		}
	}
}

// Flush makes Read return what is in the ring now, then ErrSamplesEnd
// once, so that a reader can stop having taken everything the program
// wrote.
func (s *SampleReader) Flush() error {
	if err := s.r.Flush(); err != nil {
		return fmt.Errorf("flushing the samples reader: %w", err)
	}
	return nil
}

// Close ends a Read waiting and every one after it.
func (s *SampleReader) Close() error { return s.r.Close() }

// parse reads a struct sample, false when the record is cut short, which
// the program never writes. The record is the struct cut after what its
// data holds, so it is copied over a zeroed one, in the host's layout.
func (s *SampleReader) parse(b []byte) (Sample, bool) {
	var h bpf.SteadydnsSample
	if len(b) < sampleHead {
		return Sample{}, false
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h)), b)
	qk := min(int(h.QueryLen), SampleQueryMax)
	if len(b) < sampleHead+qk+int(h.ReplyLen) {
		return Sample{}, false
	}
	addr := func(a [16]byte) netip.Addr {
		if h.V6 != 0 {
			return netip.AddrFrom16(a)
		}
		return netip.AddrFrom4([4]byte(a[:4]))
	}
	return Sample{
		Time:     s.boot.Add(time.Duration(h.BootNs)),
		Client:   netip.AddrPortFrom(addr(h.Client), h.ClientPort),
		Server:   netip.AddrPortFrom(addr(h.Server), 53),
		Query:    append([]byte(nil), h.Data[:qk]...),
		QueryLen: int(h.QueryLen),
		Reply:    append([]byte(nil), h.Data[qk:qk+int(h.ReplyLen)]...),
		Rcode:    h.Rcode,
		Answers:  h.Ancount,
		Every:    h.Every,
	}, true
}

// SampleDrops is how many samples the program could not send because
// the ring buffer was full: the reader fell behind.
func (o *Objects) SampleDrops() (uint64, error) {
	var perCPU []bpf.SteadydnsSampleState
	if err := o.SampleCpu.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("reading the sample drops: %w", err)
	}
	var n uint64
	for _, c := range perCPU {
		n += c.Dropped
	}
	return n, nil
}
