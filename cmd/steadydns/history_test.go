package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/api"
	"github.com/steadydns/steadydns/testenv"
)

// TestHistoryAcrossRestart: a check's results outlive a stop and start of
// serve, as its state does. web1's backend has no listener, so every
// probe fails; a history that was not kept would hold only the few
// probes since the restart.
func TestHistoryAcrossRestart(t *testing.T) {
	testenv.SkipUnlessRoot(t)
	bin := build(t)
	env := testenv.Start(t, testenv.Options{Backends: 1})
	e := newEdgeHost(t, env, bin, crashConfig, map[string]string{"example.test.zone": crashZone})
	sums := func() (results, failures int) {
		var h api.HistoryView
		getAPI(t, env, "/api/v1/checks/web1/history", &h)
		for _, p := range h.Hour {
			results += p.Results
			failures += p.Failures
		}
		return results, failures
	}
	// Forty probes 200 ms apart: more than a restart leaves time for.
	const kept = 40
	first := e.serve("first")
	waitServing(t, env)
	deadline := time.Now().Add(30 * time.Second)
	for {
		results, failures := sums()
		if results >= kept {
			if failures != results {
				t.Fatalf("%d results with %d failures, want every probe of a port with no listener failed", results, failures)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d results after 30 s, want %d", results, kept)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	e.serve("second")
	waitServing(t, env)
	if results, _ := sums(); results < kept {
		t.Errorf("after a restart the history holds %d results, want at least the %d from before it", results, kept)
	}
}
