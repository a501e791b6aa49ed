package health_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/prober"
)

// frameFrom ingests a frame naming prober (of region) as host sender sent it.
func (g *agg) frameFrom(sender, region, name string, entries ...prober.Entry) error {
	f := prober.Frame{Version: uint64(g.now.Unix()), ConfigHash: g.cfg.Hash, Prober: name, Region: g.region[name],
		Entries: make([]prober.Entry, tableSize)}
	copy(f.Entries, entries)
	b, err := prober.Encode(nil, &f)
	if err != nil {
		g.t.Fatal(err)
	}
	return g.a.IngestFrameFrom(sender, region, b, g.now)
}

// TestFrameBoundToSender: a frame is counted under the host that sent
// it; one whose payload names another prober, or another region than the
// sender's, is rejected and changes nothing.
func TestFrameBoundToSender(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	down := prober.Entry{Index: g.index["web"], Seq: 1, Reason: prober.ReasonTimeout}
	if err := g.frameFrom("p1", "", "p2", down); !errors.Is(err, health.ErrForged) {
		t.Fatalf("p1 sending p2's frame: %v, want ErrForged", err)
	}
	g.region["p1"] = "r2"
	if err := g.frameFrom("p1", "r1", "p1", down); !errors.Is(err, health.ErrForged) {
		t.Fatalf("p1 of r1 sending a frame of r2: %v, want ErrForged", err)
	}
	if !g.push("web") || len(g.status("web").Votes) != 0 {
		t.Fatalf("forged frames counted: up %v, votes %+v", g.up("web"), g.status("web").Votes)
	}
	if c := g.a.Counters(); c.Rejected != 2 || c.Frames != 0 {
		t.Fatalf("counters %+v, want 2 rejected", c)
	}
	g.region["p1"] = "r1"
	if err := g.frameFrom("p1", "r1", "p1", down); err != nil {
		t.Fatal(err)
	}
	if g.push("web") {
		t.Fatal("p1's own frame not counted")
	}
}

// TestFutureSeqRefused: a result whose seq lies more than a push period
// ahead of the clock is refused, so it cannot freeze a checker's vote:
// the checker's next real result still counts.
func TestFutureSeqRefused(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	now := uint64(g.now.UnixMilli())
	for _, seq := range []uint64{math.MaxUint64, now + uint64(time.Second/time.Millisecond) + 1} {
		g.result("p1", "web", seq, false)
	}
	if !g.push("web") {
		t.Fatal("a result from the future took web down")
	}
	if c := g.a.Counters(); c.Future != 2 {
		t.Fatalf("future results counted %d, want 2", c.Future)
	}
	g.result("p1", "web", now, false)
	if g.push("web") {
		t.Fatal("the real result after the future ones did not count")
	}
	// One period ahead is within the window: clocks differ a little.
	g.result("p1", "web", now+uint64(time.Second/time.Millisecond), true)
	if !g.push("web") {
		t.Fatal("a result within one period ahead was refused")
	}
}

// TestExternalStartsHealthy: an external check starts healthy, as every
// new check does, so adding one to a live record drops no answer; its
// first report decides from then on.
func TestExternalStartsHealthy(t *testing.T) {
	g := newAgg(t, []string{"ext"}, &config.Check{Type: "external", TTL: 10 * time.Second, Admin: health.AdminAuto, Initial: "healthy"})
	if !g.push("ext") || g.reason("ext") != "no_results" {
		t.Fatalf("external before any report: up=%v reason %s, want up", g.up("ext"), g.reason("ext"))
	}
	if err := g.a.SetExternal("ext", false, g.now); err != nil {
		t.Fatal(err)
	}
	if g.push("ext") || g.reason("ext") != "external" {
		t.Fatalf("external reported down: up=%v reason %s", g.up("ext"), g.reason("ext"))
	}
}
