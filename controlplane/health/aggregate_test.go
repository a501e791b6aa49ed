package health_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/prober"
)

const tableSize = 16

// memSink keeps the last table pushed, as a data plane would hold it.
type memSink struct {
	table                     []byte
	version, hash, staleAfter uint64
}

func (m *memSink) WriteHealth(table []byte, version, configHash, staleAfterNs uint64) error {
	m.table = append(m.table[:0], table...)
	m.version, m.hash, m.staleAfter = version, configHash, staleAfterNs
	return nil
}

// agg is a real aggregator over a memory sink, fed encoded frames.
type agg struct {
	t     *testing.T
	a     *health.Aggregator
	sink  *memSink
	log   *health.EventLog
	cfg   *config.Config
	index map[string]uint32 // the entries idx gives the checks
	idx   *health.Index
	now   time.Time
	seq   map[string]uint64 // checker/check → last seq sent
	// region is the region a checker's frames carry; none if absent.
	region map[string]string
}

// tcp is a probed check with these thresholds.
func tcp(unhealthy, healthy int) *config.Check {
	return &config.Check{Type: "tcp", Interval: time.Second, UnhealthyThreshold: unhealthy, HealthyThreshold: healthy, Admin: health.AdminAuto}
}

// checksOf packs checks under ids, in the order given.
func checksOf(ids []string, checks map[string]*config.Check) config.Checks {
	list := make([]*config.Check, len(ids))
	for i, id := range ids {
		c := *checks[id]
		c.ID = id
		list[i] = &c
	}
	return config.NewChecks(list)
}

// newAgg aggregates checks, in the order given, at indexes 1, 2…
func newAgg(t *testing.T, ids []string, checks ...*config.Check) *agg {
	t.Helper()
	cfg := &config.Config{Hash: 0x5eed,
		Aggregation: config.Aggregation{PushInterval: time.Second, Quorum: 0.18, StaleAfter: 10 * time.Second, TableSize: tableSize,
			CheckerTimeout: 3 * time.Second}} // config's default: three push periods
	index := map[string]uint32{}
	byID := map[string]*config.Check{}
	for i, id := range ids {
		byID[id] = checks[i]
		index[id] = uint32(i + 1)
	}
	cfg.Checks = checksOf(ids, byID)
	return newAggFor(t, cfg, index, health.Seed{})
}

// newAggFor aggregates cfg's checks at the entries index gives them.
func newAggFor(t *testing.T, cfg *config.Config, index map[string]uint32, seed health.Seed) *agg {
	t.Helper()
	g := &agg{t: t, sink: &memSink{}, log: &health.EventLog{}, cfg: cfg, index: index, idx: health.IndexAt(cfg.Checks, index, cfg.Aggregation.TableSize),
		now: time.Unix(1000, 0), seq: map[string]uint64{}, region: map[string]string{}}
	a, err := health.New(cfg, g.idx, g.sink, seed, g.log)
	if err != nil {
		t.Fatal(err)
	}
	g.a = a
	return g
}

// frame ingests one frame from checker carrying entries, padded to the
// table's capacity as a prober pads it.
func (g *agg) frame(checker string, hash uint64, entries ...prober.Entry) error {
	f := prober.Frame{Version: uint64(g.now.Unix()), ConfigHash: hash, Prober: checker, Region: g.region[checker],
		Entries: make([]prober.Entry, tableSize)}
	copy(f.Entries, entries)
	b, err := prober.Encode(nil, &f)
	if err != nil {
		g.t.Fatal(err)
	}
	return g.a.IngestFrame(b, g.now)
}

// result sends one result of check id from checker, with this seq.
func (g *agg) result(checker, id string, seq uint64, ok bool) {
	g.t.Helper()
	reason := prober.ReasonOK
	if !ok {
		reason = prober.ReasonTimeout
	}
	if err := g.frame(checker, g.cfg.Hash, prober.Entry{Index: g.index[id], Seq: seq, Healthy: ok, Reason: reason}); err != nil {
		g.t.Fatal(err)
	}
}

// push pushes the table and reports check id's entry in it.
func (g *agg) push(id string) bool {
	g.t.Helper()
	if err := g.a.Push(g.now); err != nil {
		g.t.Fatal(err)
	}
	return g.up(id)
}

func (g *agg) up(id string) bool { return healthtable.Up(g.sink.table, g.index[id]) }

func (g *agg) reason(id string) string {
	return health.ReasonName(healthtable.Reason(g.sink.table, g.index[id]))
}

func (g *agg) status(id string) health.Status {
	for _, s := range g.a.Statuses() {
		if s.ID == id {
			return s
		}
	}
	g.t.Fatalf("no status for %s", id)
	return health.Status{}
}

// feed sends consecutive results for check id from one checker, one per
// second, pushing after each, and returns the table's state after each.
func (g *agg) feed(checker, id string, results ...bool) []bool {
	var out []bool
	for _, ok := range results {
		g.seq[checker+"/"+id]++
		g.result(checker, id, g.seq[checker+"/"+id], ok)
		out = append(out, g.push(id))
		g.now = g.now.Add(time.Second)
	}
	return out
}

func TestThresholds(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(3, 2))
	// Down on the third failure, not the second.
	if got := g.feed("p1", "web", false, false, false); got[1] != true || got[2] != false {
		t.Fatalf("states %v, want down on the third failure only", got)
	}
	if r := g.reason("web"); r != "timeout" {
		t.Errorf("reason %q, want timeout", r)
	}
	// Up again on the second success, not the first.
	if got := g.feed("p1", "web", true, true); got[0] != false || got[1] != true {
		t.Fatalf("states %v, want up on the second success only", got)
	}
	// A failure streak interrupted by a success starts over.
	if got := g.feed("p1", "web", false, false, true, false, false); got[4] != true {
		t.Errorf("states %v: interrupted failures took it down", got)
	}
}

func TestSeqCountsOnce(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(2, 2))
	// The same result in three frames counts once.
	for range 3 {
		g.result("p1", "web", 7, false)
	}
	if !g.push("web") {
		t.Fatal("one failure repeated in three frames took the check down")
	}
	g.result("p1", "web", 8, false)
	if g.push("web") {
		t.Fatal("two distinct failures did not take the check down")
	}
	// Padding (seq 0) changes nothing, even at the check's own position
	// and index.
	if err := g.frame("p1", g.cfg.Hash, prober.Entry{}, prober.Entry{Index: 1, Healthy: true, Reason: prober.ReasonOK}); err != nil {
		t.Fatal(err)
	}
	g.result("p1", "web", 8, true)
	if g.push("web") {
		t.Fatal("a padding entry, or a repeated seq, brought the check back")
	}
}

func TestInvertAdmin(t *testing.T) {
	c := tcp(1, 1)
	c.Invert = true
	g := newAgg(t, []string{"web"}, c)
	if got := g.feed("p1", "web", true); got[0] {
		t.Errorf("inverted check is up after a success")
	}
	if got := g.feed("p1", "web", false); !got[0] {
		t.Errorf("inverted check is down after a failure")
	}
	if err := g.a.SetAdmin("web", health.AdminDown); err != nil {
		t.Fatal(err)
	}
	if got := g.feed("p1", "web", false); got[0] || g.reason("web") != "admin_down" {
		t.Errorf("admin down: up=%v reason %s", got[0], g.reason("web"))
	}
	if s := g.status("web"); s.Admin != health.AdminDown || s.Up {
		t.Errorf("admin down: status %+v", s)
	}
	if err := g.a.SetAdmin("web", health.AdminAuto); err != nil {
		t.Fatal(err)
	}
	if got := g.feed("p1", "web", false); !got[0] {
		t.Errorf("back to auto: the checkers' state is lost")
	}
	if err := g.a.SetAdmin("web", "sideways"); err == nil || errors.Is(err, health.ErrUnknownCheck) {
		t.Errorf("admin override sideways: %v, want a bad value error", err)
	}
	if err := g.a.SetAdmin("nope", health.AdminUp); !errors.Is(err, health.ErrUnknownCheck) {
		t.Errorf("admin override of an unknown check: %v, want ErrUnknownCheck", err)
	}
}

func TestQuorum(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	// 10 checkers; healthy while more than 18% say so.
	for i := range 10 {
		g.result(string(rune('a'+i)), "web", 1, i < 2)
	}
	if !g.push("web") {
		t.Errorf("2 of 10 healthy (20%% > 18%%): down")
	}
	if s := g.status("web"); s.Checkers != 10 || s.Healthy != 2 {
		t.Errorf("status %+v, want 10 checkers reporting, 2 healthy", s)
	}
	g.result("b", "web", 2, false)
	if g.push("web") {
		t.Errorf("1 of 10 healthy: up")
	}
	// Checkers not heard from within checker_timeout (3s) drop out of
	// the count: the one healthy checker left is 100%.
	g.now = g.now.Add(5 * time.Second)
	g.result("a", "web", 3, true)
	if !g.push("web") || g.status("web").Checkers != 1 {
		t.Errorf("partition: up=%v checkers=%d, want up judged by the 1 checker heard", g.up("web"), g.status("web").Checkers)
	}
}

func TestHysteresis(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	g.cfg.Aggregation.Hysteresis = &config.Hysteresis{Down: 0.2, Up: 0.85}
	g.a.Reconfigure(g.cfg, g.idx)
	steps := []struct {
		healthy int
		want    bool
	}{{5, true}, {2, true}, {1, false}, {5, false}, {8, false}, {9, true}, {3, true}}
	for k, st := range steps {
		for i := range 10 {
			g.result(string(rune('a'+i)), "web", uint64(k+1), i < st.healthy)
		}
		if got := g.push("web"); got != st.want {
			t.Errorf("step %d: %d of 10 healthy: up=%v, want %v", k, st.healthy, got, st.want)
		}
	}
}

func TestCalculatedAndExternal(t *testing.T) {
	cfg := &config.Config{
		Checks: checksOf([]string{"top", "calc", "a", "b", "ext", "web"}, map[string]*config.Check{
			"a":    tcp(1, 1),
			"b":    tcp(1, 1),
			"calc": {Type: "calculated", Children: []string{"a", "b"}, MinHealthy: 2, Admin: health.AdminAuto},
			"top":  {Type: "calculated", Children: []string{"calc"}, MinHealthy: 1, Admin: health.AdminAuto},
			"ext":  {Type: "external", TTL: 10 * time.Second, Admin: health.AdminAuto, Initial: "unhealthy"},
			"web":  tcp(1, 1),
		}),
		Hash:        1,
		Aggregation: config.Aggregation{PushInterval: time.Second, Quorum: 0.18, TableSize: tableSize},
	}
	// Parents sit below their children, so one push settles the chain
	// only if children are evaluated first.
	index := map[string]uint32{"top": 1, "calc": 2, "a": 3, "b": 4, "ext": 5, "web": 6}
	g := newAggFor(t, cfg, index, health.Seed{})
	g.result("p1", "b", 1, false)
	if g.push("calc") || g.up("top") || g.reason("calc") != "calculated" {
		t.Errorf("1 of 2 children healthy, min 2: calc up=%v (%s), top up=%v", g.up("calc"), g.reason("calc"), g.up("top"))
	}
	g.result("p1", "b", 2, true)
	if !g.push("calc") || !g.up("top") {
		t.Errorf("both children healthy: calc up=%v, top up=%v", g.up("calc"), g.up("top"))
	}
	// External with initial unhealthy: down until reported, up while
	// fresh, down once expired.
	if g.up("ext") || g.reason("ext") != "no_results" {
		t.Errorf("external before any report: up=%v reason %s", g.up("ext"), g.reason("ext"))
	}
	if err := g.a.SetExternal("ext", true, g.now); err != nil {
		t.Fatal(err)
	}
	g.now = g.now.Add(9 * time.Second)
	if !g.push("ext") || g.reason("ext") != "external" {
		t.Errorf("external within its ttl: up=%v reason %s", g.up("ext"), g.reason("ext"))
	}
	g.now = g.now.Add(2 * time.Second)
	if g.push("ext") || g.reason("ext") != "external_expired" {
		t.Errorf("external past its ttl: up=%v reason %s", g.up("ext"), g.reason("ext"))
	}
	if err := g.a.SetExternal("web", true, g.now); err == nil || errors.Is(err, health.ErrUnknownCheck) {
		t.Errorf("external state for a tcp check: %v, want refused", err)
	}
	if err := g.a.SetExternal("nope", true, g.now); !errors.Is(err, health.ErrUnknownCheck) {
		t.Errorf("external state for an unknown check: %v, want ErrUnknownCheck", err)
	}
}

// TestPush: every push writes the whole table, entry 0 always up, with the
// push slot as version, strictly increasing, the config hash and
// stale_after.
func TestPush(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	g.result("p1", "web", 1, false)
	g.push("web")
	if len(g.sink.table) != healthtable.Bytes(tableSize) {
		t.Fatalf("table of %d bytes, want %d", len(g.sink.table), healthtable.Bytes(tableSize))
	}
	if !healthtable.Up(g.sink.table, 0) || health.ReasonName(healthtable.Reason(g.sink.table, 0)) != "static" {
		t.Errorf("entry 0 is not up (static)")
	}
	if g.sink.version != 1000 || g.sink.hash != g.cfg.Hash || g.sink.staleAfter != uint64(10*time.Second) {
		t.Errorf("version %d hash %x stale_after %d, want 1000 %x %d", g.sink.version, g.sink.hash, g.sink.staleAfter, g.cfg.Hash, 10*time.Second)
	}
	g.push("web") // the same slot again
	if g.sink.version != 1001 {
		t.Errorf("a second push in the same slot has version %d, want 1001", g.sink.version)
	}
	// Unused entries start healthy and stay so.
	for i := uint32(2); i < tableSize; i++ {
		if !healthtable.Up(g.sink.table, i) {
			t.Errorf("unused entry %d is down", i)
		}
	}
}

// TestFrames: a frame under another config hash, or not a frame at all,
// is rejected and counted, and changes nothing.
func TestFrames(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	if err := g.frame("p1", g.cfg.Hash+1, prober.Entry{Index: 1, Seq: 1, Reason: prober.ReasonTimeout}); err == nil {
		t.Error("a frame of another config was applied")
	}
	if err := g.a.IngestFrame([]byte("not a frame"), g.now); err == nil {
		t.Error("garbage was applied as a frame")
	}
	if !g.push("web") {
		t.Error("a rejected frame took the check down")
	}
	g.result("p1", "web", 1, true)
	if c := g.a.Counters(); c.Frames != 1 || c.Rejected != 2 {
		t.Errorf("counters %+v, want 1 frame applied, 2 rejected", c)
	}
}

// TestSeed: a restarted aggregator takes each check's state and reason
// from a table pushed under the same config, so nothing flaps; a forced
// state seeds the override, not the checkers' state; a table of another
// config is ignored.
func TestSeed(t *testing.T) {
	before := newAgg(t, []string{"down", "forced", "up"}, tcp(1, 1), tcp(1, 1), tcp(1, 1))
	before.result("p1", "down", 1, false)
	before.result("p1", "forced", 1, true)
	if err := before.a.SetAdmin("forced", health.AdminDown); err != nil {
		t.Fatal(err)
	}
	before.push("down")
	seed := health.Seed{ConfigHash: before.cfg.Hash, Table: before.sink.table}

	g := newAggFor(t, before.cfg, before.index, seed)
	// No checker heard yet: the seeded states stay.
	if g.push("down") || g.reason("down") != "timeout" {
		t.Errorf("seeded down check: up=%v reason %s, want down (timeout)", g.up("down"), g.reason("down"))
	}
	if g.up("forced") || g.reason("forced") != "admin_down" || !g.up("up") {
		t.Errorf("forced up=%v (%s), up up=%v: want the override seeded, the other check up", g.up("forced"), g.reason("forced"), g.up("up"))
	}
	if s := g.a.Saved()["forced"]; !s.State || s.Admin != health.AdminDown {
		t.Errorf("forced saved %+v: want the override, and the checkers' state not seeded down by it", s)
	}
	if len(g.log.Events()) != 0 {
		t.Errorf("events %v after a seeded start", g.log.Events())
	}

	other := seed
	other.ConfigHash++
	if g := newAggFor(t, before.cfg, before.index, other); !g.push("down") || g.reason("down") != "no_results" {
		t.Errorf("seed of another config: up=%v reason %s, want a fresh start", g.up("down"), g.reason("down"))
	}
	if _, err := health.New(before.cfg, before.idx, &memSink{}, health.Seed{ConfigHash: seed.ConfigHash, Table: seed.Table[:8]}, &health.EventLog{}); err == nil {
		t.Error("a seed of the wrong size was taken")
	}
}

// TestReconfigure: a check that stays keeps its state and its admin
// override; an index a new check takes over starts healthy.
func TestReconfigure(t *testing.T) {
	g := newAgg(t, []string{"web", "db"}, tcp(1, 1), tcp(1, 1))
	g.result("p1", "web", 1, false)
	g.result("p1", "db", 1, false)
	if err := g.a.SetAdmin("web", health.AdminUp); err != nil {
		t.Fatal(err)
	}
	g.push("web")
	cfg := *g.cfg
	web, _ := g.cfg.Checks.Get("web")
	cfg.Checks = checksOf([]string{"web", "mail"}, map[string]*config.Check{"web": &web, "mail": tcp(1, 1)})
	g.reconfigure(&cfg, map[string]uint32{"web": 1, "mail": 2})
	if !g.push("web") || g.reason("web") != "admin_up" {
		t.Errorf("web after reload: up=%v reason %s, want the admin override kept", g.up("web"), g.reason("web"))
	}
	if err := g.a.SetAdmin("web", health.AdminAuto); err != nil {
		t.Fatal(err)
	}
	if g.push("web") {
		t.Errorf("web after reload: the checkers' down state was lost")
	}
	if !g.up("mail") {
		t.Errorf("mail took db's index and its down state")
	}
	// p1 reported db, not mail: it is not among mail's checkers until it
	// does, though it was heard within checker_timeout.
	if s := g.status("mail"); s.Checkers != 0 || s.Reason != "no_results" || len(s.Votes) != 1 || s.Votes[0].Counted {
		t.Errorf("mail after reload: checkers %d reason %s votes %v, want db's checker not counted", s.Checkers, s.Reason, s.Votes)
	}
}

// TestEvents: a transition after the first push goes to the log, with
// the reason and the detail of the last result.
func TestEvents(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	g.push("web")
	g.a.Observe(prober.Result{ID: "web", Index: 1, Seq: 1, Time: g.now, Reason: prober.ReasonTimeout, Detail: "no reply in 1s"})
	g.feed("p1", "web", false, true)
	evs := g.log.Events()
	want := []health.Event{
		{Time: time.Unix(1000, 0), Check: "web", From: "healthy", To: "unhealthy", Reason: "timeout", Detail: "no reply in 1s"},
		{Time: time.Unix(1001, 0), Check: "web", From: "unhealthy", To: "healthy", Reason: "ok", Detail: "no reply in 1s"},
	}
	if fmt.Sprint(evs) != fmt.Sprint(want) {
		t.Errorf("events\n%v\nwant\n%v", evs, want)
	}
	if s := g.status("web"); len(s.Results) != 1 || s.Results[0].Detail != "no reply in 1s" || s.Since != time.Unix(1001, 0) {
		t.Errorf("status %+v: want the observed result and the last change's time", s)
	}
}

// reconfigure applies cfg with its checks at the entries index gives them.
func (g *agg) reconfigure(cfg *config.Config, index map[string]uint32) {
	g.cfg, g.index, g.idx = cfg, index, health.IndexAt(cfg.Checks, index, cfg.Aggregation.TableSize)
	g.a.Reconfigure(g.cfg, g.idx)
}
