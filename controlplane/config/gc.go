package config

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// loadGC is the state of lowerGC, which lowers the GC percent while a config's YAML
// tree is live. The yaml package builds a file's whole tree before
// decoding starts, and a fleet's 65,536 checks are 150 MB of nodes; at the
// default percent the heap grows to twice that before the tree is
// collected. A process keeps the address space it grew to: the runtime
// releases the pages, and for as long as the process lives its per-push
// garbage (an aggregator's: the NATS client's copy of every chunk) lands
// in them and faults them back in while the scavenger releases others, so
// every push costs more after a larger peak (`make bench-fleet`, "Per
// push, over NATS"). At a quarter of the percent the heap peaks at about
// 1.25 times the tree, for more collections during the load. Loads may
// run at once (a reload while a revision arrives): the first lowers the
// percent, the last restores it.
var loadGC struct {
	sync.Mutex
	loads int
	prev  int
}

// lowerGC lowers the percent until the returned function is first called.
// A collector turned off (GOGC=off) stays off.
func lowerGC() (restore func()) {
	loadGC.Lock()
	defer loadGC.Unlock()
	if loadGC.loads == 0 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		loadGC.prev = int(int64(s[0].Value.Uint64())) // off reads as -1
		if loadGC.prev > 0 {
			debug.SetGCPercent(max(loadGC.prev/4, 1))
		}
	}
	loadGC.loads++
	return sync.OnceFunc(func() {
		loadGC.Lock()
		defer loadGC.Unlock()
		if loadGC.loads--; loadGC.loads == 0 && loadGC.prev > 0 {
			debug.SetGCPercent(loadGC.prev)
		}
	})
}
