package transport

import (
	"testing"
)

// BenchmarkPublishReassemble publishes a 65,536-entry result frame (1.5 MiB,
// two chunks) through an embedded server and waits for its reassembly.
func BenchmarkPublishReassemble(b *testing.B) {
	f := newFleet(b)
	s := embed(b, f, EmbedOptions{})
	prober := connect(b, s.ClientURL(), "p1", f.prober, Options{})
	agg := connect(b, s.ClientURL(), "a1", f.aggregator, Options{})
	done := make(chan struct{}, 1)
	sub, err := agg.Subscribe(KindFrame, "c1", Filter{}, func(Message) { done <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	flush(b, agg)
	frame := make([]byte, 64+65536*24)
	b.SetBytes(int64(len(frame)))
	slot := uint64(0)
	for b.Loop() {
		slot++
		if err := prober.Publish(KindFrame, slot, 1, frame); err != nil {
			b.Fatal(err)
		}
		<-done
	}
	if c := sub.Counters(); c.Missing != 0 || c.Dropped != 0 {
		b.Fatalf("counters %+v", c)
	}
}
