package health

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/loader"
	"github.com/steadydns/steadydns/prober"
)

// BenchmarkPush measures the aggregator's constant work: ingesting one
// frame from a checker and pushing the whole table, for 10 and 65,535
// configured checks, all passing or all failing. Encoding the frame is the
// prober's work and is not timed. The table and the frame
// are the same size in every case; the cost should be too.
//
//	go test ./controlplane/health -run '^$' -bench Push -benchtime 200x
func BenchmarkPush(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skipf("the health table is a bpf map: needs root (uid %d)", os.Geteuid())
	}
	dir := b.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		b.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	const capacity = 65536
	objs, err := loader.Load(loader.Options{BPFFS: dir + "/sd", HealthCapacity: capacity, Servers: []netip.Addr{netip.MustParseAddr("198.18.0.2")}})
	if err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	for _, n := range []int{10, capacity - 1} {
		for _, failing := range []bool{false, true} {
			b.Run(fmt.Sprintf("checks=%d/failing=%v", n, failing), func(b *testing.B) {
				cfg := &config.Config{HealthChecks: map[string]*config.Check{}, Hash: 1,
					Aggregation: config.Aggregation{PushInterval: time.Second, Quorum: 0.18, TableSize: capacity}}
				for i := range n {
					id := fmt.Sprintf("c%d", i)
					cfg.CheckIDs = append(cfg.CheckIDs, id)
					cfg.HealthChecks[id] = &config.Check{ID: id, Type: "tcp", Interval: time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1, Admin: AdminAuto}
				}
				index, err := Assign(cfg.CheckIDs, nil, capacity)
				if err != nil {
					b.Fatal(err)
				}
				t, err := New(objs, cfg, index)
				if err != nil {
					b.Fatal(err)
				}
				framer, err := prober.NewFramer("p1", capacity)
				if err != nil {
					b.Fatal(err)
				}
				probes := map[string]prober.Probe{}
				for id, c := range cfg.HealthChecks {
					probes[id] = prober.Probe{Check: c, Index: index[id]}
				}
				if err := framer.Configure(1, probes); err != nil {
					b.Fatal(err)
				}
				// One frame with a result for every check; each round
				// gives every result a new seq in place, so the work outside
				// the timer walks the whole frame in every case.
				for id := range cfg.HealthChecks {
					framer.Record(prober.Result{ID: id, Index: index[id], Seq: 1, Healthy: !failing})
				}
				frame := framer.AppendFrame(nil, 1)
				now := time.Unix(1_000_000, 0)
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					for p := prober.HeaderSize; p+prober.EntrySize <= len(frame); p += prober.EntrySize {
						if seq := binary.LittleEndian.Uint64(frame[p+8:]); seq != 0 {
							binary.LittleEndian.PutUint64(frame[p+8:], seq+1)
						}
					}
					now = now.Add(time.Second)
					b.StartTimer()
					if err := t.IngestFrame(frame, now); err != nil {
						b.Fatal(err)
					}
					if err := t.Push(now); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(frame)), "frame-bytes")
				b.ReportMetric(float64(loader.HealthTableBytes(capacity)), "table-bytes")
			})
		}
	}
}
