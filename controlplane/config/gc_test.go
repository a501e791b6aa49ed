package config

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
)

func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(int64(s[0].Value.Uint64()))
}

// Loading lowers the collector's percent while the YAML tree is live and
// gives the process back the one it had, however many loads overlap, and
// a collector turned off stays off.
func TestLoadRestoresGCPercent(t *testing.T) {
	cfg := "server:\n  listen: [\"198.18.0.2:53\"]\nhealth_checks:\n  a: {type: tcp, port: 22}\n"
	for _, percent := range []int{150, -1} {
		prev := debug.SetGCPercent(percent)
		t.Cleanup(func() { debug.SetGCPercent(prev) })
		restore := lowerGC()
		want := percent / 4
		if percent < 0 {
			want = percent
		}
		if got := gcPercent(); got != want {
			t.Errorf("GOGC %d: %d while loading, want %d", percent, got, want)
		}
		restore()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := Parse("config.yaml", []byte(cfg)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := gcPercent(); got != percent {
			t.Errorf("GOGC %d: %d after loading", percent, got)
		}
	}
}
