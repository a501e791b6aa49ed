package prober

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Framer keeps the latest result of every check and encodes them into a
// frame of fixed capacity. Its methods are safe for concurrent use; Record
// fits Options.OnResult.
type Framer struct {
	capacity int

	mu    sync.Mutex
	frame Frame          // Entries has the capacity's length, always
	slot  map[uint32]int // health-table index → entry position
}

// NewFramer returns a framer for the prober with this id and region,
// whose frames hold capacity entries however many checks run.
func NewFramer(prober, region string, capacity int) (*Framer, error) {
	if len(prober) > MaxProberID {
		return nil, fmt.Errorf("making framer: prober id %q is longer than %d bytes", prober, MaxProberID)
	}
	if len(region) > MaxRegion {
		return nil, fmt.Errorf("making framer: region %q is longer than %d bytes", region, MaxRegion)
	}
	if capacity < 0 {
		return nil, fmt.Errorf("making framer: capacity %d is negative", capacity)
	}
	return &Framer{
		capacity: capacity,
		frame:    Frame{Prober: prober, Region: region, Entries: make([]Entry, capacity)},
		slot:     map[uint32]int{},
	}, nil
}

// Configure sets the config hash and the checks that own entries. Call it
// after Scheduler.Update with the same probes: Update has then stopped the
// old probes, and a new hash clears every result, so a frame never carries
// a result measured under another config. Results for indexes not
// configured are dropped.
func (f *Framer) Configure(hash uint64, probes map[string]Probe) error {
	idx := make([]uint32, 0, len(probes))
	for id, p := range probes {
		if p.Index == 0 {
			return fmt.Errorf("configuring frames: check %s has index 0, which is reserved", id)
		}
		idx = append(idx, p.Index)
	}
	if len(idx) > f.capacity {
		return fmt.Errorf("configuring frames: %d checks for a capacity of %d", len(idx), f.capacity)
	}
	slices.Sort(idx)
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := make([]Entry, f.capacity)
	slot := make(map[uint32]int, len(idx))
	for i, x := range idx {
		entries[i] = Entry{Index: x}
		if j, ok := f.slot[x]; ok && hash == f.frame.ConfigHash {
			entries[i] = f.frame.Entries[j]
		}
		slot[x] = i
	}
	f.frame.Entries, f.slot, f.frame.ConfigHash = entries, slot, hash
	return nil
}

// Record keeps r if it is newer than the entry's last result.
func (f *Framer) Record(r Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, ok := f.slot[r.Index]
	if !ok || r.Seq <= f.frame.Entries[i].Seq {
		return
	}
	f.frame.Entries[i] = Entry{Index: r.Index, Seq: r.Seq, Healthy: r.Healthy, Reason: r.Reason, Latency: r.Latency}
}

// AppendFrame appends the encoded frame with this version to dst. Every
// entry is encoded, used or not, so the cost does not depend on how many
// checks run or what they found.
func (f *Framer) AppendFrame(dst []byte, version uint64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frame.Version = version
	dst, _ = Encode(dst, &f.frame) // NewFramer checked the prober id and region
	return dst
}

// Run emits a frame at the start of every period until ctx ends. The
// version is the period's slot number (Unix time / period), kept strictly
// increasing. emit owns the frame only during the call.
func (f *Framer) Run(ctx context.Context, period time.Duration, emit func(frame []byte)) {
	var last uint64
	buf := make([]byte, 0, FrameSize(f.capacity))
	for {
		now := time.Now()
		wait := period - time.Duration(now.UnixNano())%period
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		v := uint64(time.Now().UnixNano() / int64(period))
		if v <= last {
			v = last + 1
		}
		last = v
		buf = f.AppendFrame(buf[:0], v)
		emit(buf)
	}
}
