package health_test

import (
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
)

// savedRun makes an aggregator whose web check is down, db forced down
// through the API though its checkers say healthy, and ext reported up,
// and returns it after a push.
func savedRun(t *testing.T) *agg {
	ext := &config.Check{Type: "external", TTL: time.Hour, Admin: health.AdminAuto}
	g := newAgg(t, []string{"web", "db", "ext"}, tcp(1, 1), tcp(1, 1), ext)
	g.result("p1", "web", 1, false)
	g.result("p1", "db", 1, true)
	if err := g.a.SetAdmin("db", health.AdminDown); err != nil {
		t.Fatal(err)
	}
	if err := g.a.SetExternal("ext", true, g.now); err != nil {
		t.Fatal(err)
	}
	g.push("web")
	return g
}

// TestSavedAcrossLayouts: a restarted aggregator seeded from Saved, with
// no pinned table and every check at another entry (another table size),
// starts each check where it was: down stays down until its checkers say
// otherwise, the API's override and the external report stay.
func TestSavedAcrossLayouts(t *testing.T) {
	before := savedRun(t)
	saved := before.a.Saved()
	if len(saved) != 3 || saved["db"].Admin != health.AdminDown || saved["web"].Admin != "" || saved["ext"].External == nil {
		t.Fatalf("saved %+v: want three checks, db's override, ext's report", saved)
	}

	cfg := *before.cfg
	cfg.Hash++ // indexes are in the hash: another layout is another hash
	g := newAggFor(t, &cfg, map[string]uint32{"web": 9, "db": 4, "ext": 13}, health.Seed{Saved: saved})
	g.now = before.now.Add(time.Second)
	if g.push("web") || g.reason("web") != "timeout" {
		t.Errorf("web: up=%v reason %s, want down (timeout) as saved", g.up("web"), g.reason("web"))
	}
	if g.up("db") || g.reason("db") != "admin_down" || g.status("db").Admin != health.AdminDown {
		t.Errorf("db: up=%v reason %s admin %s, want the override kept", g.up("db"), g.reason("db"), g.status("db").Admin)
	}
	if !g.up("ext") || g.reason("ext") != "external" {
		t.Errorf("ext: up=%v reason %s, want the report kept", g.up("ext"), g.reason("ext"))
	}
	if s := g.status("web"); !s.Since.Equal(before.status("web").Since) {
		t.Errorf("web since %v, want %v as saved", s.Since, before.status("web").Since)
	}
	// The checkers start from the saved state: one success (healthy
	// threshold 1) brings web back, and that is a logged transition.
	g.result("p1", "web", 1, true)
	if !g.push("web") || len(g.log.Events()) != 1 {
		t.Errorf("web after a success: up=%v, events %v", g.up("web"), g.log.Events())
	}
	// Auto through the API hands db back to its checkers.
	if err := g.a.SetAdmin("db", health.AdminAuto); err != nil {
		t.Fatal(err)
	}
	if g.a.Saved()["db"].Admin != health.AdminAuto {
		t.Errorf("db's saved override %q, want auto as set", g.a.Saved()["db"].Admin)
	}
}

// TestSavedKnownCheck: a check the restart's config leaves out, or a
// reload removes, keeps its saved state; a reload that adds it back starts
// it there, not healthy. A check never seen starts healthy.
func TestSavedKnownCheck(t *testing.T) {
	before := savedRun(t)
	saved := before.a.Saved()

	cfg := *before.cfg
	db, _ := before.cfg.Checks.Get("db")
	cfg.Checks = checksOf([]string{"db"}, map[string]*config.Check{"db": &db})
	g := newAggFor(t, &cfg, map[string]uint32{"db": 2}, health.Seed{Saved: saved})
	g.push("db")
	if _, ok := g.a.Saved()["web"]; !ok {
		t.Fatal("web, left out of the config, was forgotten")
	}

	grown := *before.cfg
	grown.Checks = checksOf([]string{"db", "web", "new"}, map[string]*config.Check{"db": &db, "web": tcp(1, 1), "new": tcp(1, 1)})
	g.reconfigure(&grown, map[string]uint32{"db": 2, "web": 5, "new": 6})
	if g.push("web") || g.reason("web") != "timeout" {
		t.Errorf("web added back: up=%v reason %s, want down as saved", g.up("web"), g.reason("web"))
	}
	if !g.up("new") {
		t.Error("a check never seen did not start healthy")
	}

	// Removed by a reload, then added back: the same.
	g.reconfigure(&cfg, map[string]uint32{"db": 2})
	g.push("db")
	g.reconfigure(&grown, map[string]uint32{"db": 2, "web": 7, "new": 6})
	if g.push("web") {
		t.Error("web removed and added back by reloads started healthy")
	}
}

// TestChanged: every change Saved reflects signals Changed.
func TestChanged(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	drain := func() {
		select {
		case <-g.a.Changed():
		default:
		}
	}
	signalled := func(what string) {
		t.Helper()
		select {
		case <-g.a.Changed():
		default:
			t.Errorf("%s: no change signalled", what)
		}
	}
	signalled("new")
	g.push("web")
	drain()
	g.push("web")
	select {
	case <-g.a.Changed():
		t.Error("a push that changed nothing signalled")
	default:
	}
	g.result("p1", "web", 1, false)
	g.push("web")
	signalled("transition")
	if err := g.a.SetAdmin("web", health.AdminUp); err != nil {
		t.Fatal(err)
	}
	signalled("admin")
}

// TestFirstPushChanged: a check's first push puts its state in Saved and
// signals Changed, even when it is no transition: a check down from its
// first push must reach the state file, or a restart starts it healthy.
func TestFirstPushChanged(t *testing.T) {
	g := newAgg(t, []string{"web"}, tcp(1, 1))
	<-g.a.Changed() // New's
	g.result("p1", "web", 1, false)
	if g.push("web") {
		t.Fatal("web up after a failure, want down")
	}
	select {
	case <-g.a.Changed():
	default:
		t.Error("the first push signalled no change")
	}
	if s, ok := g.a.Saved()["web"]; !ok || s.Up || s.State {
		t.Errorf("saved web %+v (present %v), want down", s, ok)
	}
	if n := len(g.log.Events()); n != 0 {
		t.Errorf("%d events, want none: the first push is no transition", n)
	}
}

// TestRestoreEvents: events of an earlier run come first, then the new
// ones, within the log's bound.
func TestRestoreEvents(t *testing.T) {
	var l health.EventLog
	l.Add(health.Event{Check: "new"})
	earlier := make([]health.Event, 1000)
	for i := range earlier {
		earlier[i].Check = "old"
	}
	earlier[999].Check = "last old"
	l.Restore(earlier)
	evs := l.Events()
	if len(evs) != 1000 || evs[998].Check != "last old" || evs[999].Check != "new" {
		t.Errorf("%d events, ending %v: want 1000, the earlier run's last then the new one", len(evs), evs[len(evs)-2:])
	}
}

// TestAdminFromPinnedTable: a restart with no saved state but a table
// pushed under the same config takes each admin override from its entry's
// reason. One other than the config's was set through the API, and comes
// back as such; one equal to the config's is the config's, unless saved
// state says the API set it. The table, pushed every period, is newer than
// the saved state.
func TestAdminFromPinnedTable(t *testing.T) {
	downInConfig := tcp(1, 1)
	downInConfig.Admin = health.AdminDown
	upInConfig := tcp(1, 1)
	upInConfig.Admin = health.AdminUp
	ids := []string{"api-down", "api-up", "api-auto", "config-down", "config-up", "plain"}
	before := newAgg(t, ids, tcp(1, 1), tcp(1, 1), downInConfig, downInConfig, upInConfig, tcp(1, 1))
	before.result("p1", "api-down", 1, true)
	before.result("p1", "api-up", 1, false)
	before.result("p1", "api-auto", 1, false)
	before.result("p1", "config-up", 1, false)
	for id, a := range map[string]string{"api-down": health.AdminDown, "api-up": health.AdminUp, "api-auto": health.AdminAuto} {
		if err := before.a.SetAdmin(id, a); err != nil {
			t.Fatal(err)
		}
	}
	before.push("plain")
	table := health.Seed{ConfigHash: before.cfg.Hash, Table: before.sink.table}

	want := map[string]struct {
		up            bool
		reason, admin string
		saved         string // the override Saved keeps: the API's alone
	}{
		"api-down":    {false, "admin_down", health.AdminDown, health.AdminDown},
		"api-up":      {true, "admin_up", health.AdminUp, health.AdminUp},
		"api-auto":    {false, "timeout", health.AdminAuto, health.AdminAuto},
		"config-down": {false, "admin_down", health.AdminDown, ""},
		"config-up":   {true, "admin_up", health.AdminUp, ""},
		"plain":       {true, "no_results", health.AdminAuto, ""},
	}
	g := newAggFor(t, before.cfg, before.index, table)
	g.now = before.now.Add(time.Second)
	g.push("plain")
	saved := g.a.Saved()
	for id, w := range want {
		if g.up(id) != w.up || g.reason(id) != w.reason || g.status(id).Admin != w.admin || saved[id].Admin != w.saved {
			t.Errorf("%s: up=%v reason %s admin %s saved %q, want up=%v reason %s admin %s saved %q", id,
				g.up(id), g.reason(id), g.status(id).Admin, saved[id].Admin, w.up, w.reason, w.admin, w.saved)
		}
	}

	// The restored override is the API's: a reload that drops the
	// config's override leaves it, and drops the config's own.
	cfg := *before.cfg
	byID := map[string]*config.Check{}
	for _, id := range ids {
		byID[id] = tcp(1, 1)
	}
	cfg.Checks = checksOf(ids, byID)
	g.reconfigure(&cfg, before.index)
	if g.push("api-down") || !g.up("config-down") || g.status("config-down").Admin != health.AdminAuto {
		t.Errorf("after a reload without config overrides: api-down up=%v, config-down up=%v admin %s; want the API's kept, the config's gone",
			g.up("api-down"), g.up("config-down"), g.status("config-down").Admin)
	}

	// Saved state from before the API changed an override: the table says
	// what the API set last.
	stale := before.a.Saved()
	stale["api-auto"] = health.Saved{State: false, Up: false, Reason: 0x82, Admin: health.AdminDown}
	stale["config-down"] = health.Saved{State: true, Up: true, Reason: 0x81, Admin: health.AdminUp}
	g = newAggFor(t, before.cfg, before.index, health.Seed{Saved: stale, ConfigHash: table.ConfigHash, Table: table.Table})
	g.push("plain")
	saved = g.a.Saved()
	if g.status("api-auto").Admin != health.AdminAuto || saved["api-auto"].Admin != health.AdminAuto {
		t.Errorf("api-auto admin %s saved %q: want auto from the table", g.status("api-auto").Admin, saved["api-auto"].Admin)
	}
	if g.up("config-down") || g.status("config-down").Admin != health.AdminDown || saved["config-down"].Admin != health.AdminDown {
		t.Errorf("config-down up=%v admin %s saved %q: want down, as the API set it after the saved up",
			g.up("config-down"), g.status("config-down").Admin, saved["config-down"].Admin)
	}
}
