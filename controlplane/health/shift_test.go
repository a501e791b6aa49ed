package health_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/healthtable"
)

// regionConfig has web1 and web2, answers of web1 in r1 and r2, one of
// web2 in r2, one without a check in r1 and one without a region.
func regionConfig(records ...config.Record) *config.Config {
	cfg := &config.Config{Hash: 0x5eed,
		Server: config.Server{Geo: &config.Geo{Regions: []config.Region{{Name: "r1"}, {Name: "r2"}, {Name: "r3"}}}},
		Aggregation: config.Aggregation{PushInterval: time.Second, Quorum: 0.18, StaleAfter: 10 * time.Second, TableSize: 64,
			CheckerTimeout: 3 * time.Second}}
	cfg.Checks = checksOf([]string{"web1", "web2"}, map[string]*config.Check{"web1": tcp(1, 1), "web2": tcp(1, 1)})
	if records == nil {
		records = []config.Record{
			{Name: "www.example.test.", Answers: []config.Answer{{Check: "web1", Region: "r1"}, {Check: "web1", Region: "r2"}, {Check: "web2", Region: "r2"}}},
			{Name: "api.example.test.", Answers: []config.Answer{{Region: "r1"}, {Check: "web1"}, {Check: "web1", Region: "r1"}}},
		}
	}
	cfg.Records = records
	return cfg
}

func TestAssignDerived(t *testing.T) {
	cfg := regionConfig()
	x, err := health.AssignConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := health.Assign(cfg.Checks, nil, 64)
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint32]string{0: "entry 0"}
	for _, id := range []string{"web1", "web2"} {
		i, _ := x.Entry(id)
		if j, _ := plain.Entry(id); i != j {
			t.Errorf("%s: entry %d beside derived entries, %d without: derived entries moved a check", id, i, j)
		}
		used[i] = id
	}
	// Each pair once, however many answers use it.
	pairs := [][2]string{{"web1", "r1"}, {"web1", "r2"}, {"web2", "r2"}, {"", "r1"}}
	if len(x.Derived()) != len(pairs) {
		t.Fatalf("%d derived entries, want %d: %+v", len(x.Derived()), len(pairs), x.Derived())
	}
	for _, p := range pairs {
		i, ok := x.AnswerEntry(p[0], p[1])
		if !ok {
			t.Fatalf("%q in %s: no entry", p[0], p[1])
		}
		if other, dup := used[i]; dup {
			t.Errorf("%q in %s: entry %d, already %s's", p[0], p[1], i, other)
		}
		used[i] = p[0] + "@" + p[1]
		if x.OwnerID(i) != "" {
			t.Errorf("derived entry %d owned by check %q", i, x.OwnerID(i))
		}
	}
	web1, _ := x.Entry("web1")
	for _, c := range []struct {
		check, region string
		want          uint32
		ok            bool
	}{
		{"web1", "", web1, true},
		{"", "", 0, true},
		{"web2", "r1", 0, false}, // no answer is web2's in r1
		{"web1", "r9", 0, false},
		{"web9", "r1", 0, false},
	} {
		if got, ok := x.AnswerEntry(c.check, c.region); got != c.want || ok != c.ok {
			t.Errorf("AnswerEntry(%q, %q) = %d, %v; want %d, %v", c.check, c.region, got, ok, c.want, c.ok)
		}
	}

	// Another host, answers in another order, agrees; a reload that
	// adds a pair keeps every entry.
	swapped := regionConfig()
	slices.Reverse(swapped.Records)
	y, err := health.AssignConfig(swapped, nil)
	if err != nil {
		t.Fatal(err)
	}
	more := regionConfig(append(regionConfig().Records, config.Record{Answers: []config.Answer{{Check: "web2", Region: "r3"}}})...)
	z, err := health.AssignConfig(more, x)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		i, _ := x.RegionEntry(p[0], p[1])
		j, _ := y.RegionEntry(p[0], p[1])
		k, _ := z.RegionEntry(p[0], p[1])
		if i != j || i != k {
			t.Errorf("%q in %s: entry %d, %d on another host, %d after a reload", p[0], p[1], i, j, k)
		}
	}
	if i, ok := z.RegionEntry("web2", "r3"); !ok || used[i] != "" {
		t.Errorf("the added pair: entry %d (%v), already %q's", i, ok, used[i])
	}

	if _, err := health.AssignConfig(regionConfig(), nil); err != nil {
		t.Fatal(err)
	}
	small := regionConfig()
	small.Aggregation.TableSize = 6 // 5 entries for 2 checks and 4 pairs
	if _, err := health.AssignConfig(small, nil); err == nil || !strings.Contains(err.Error(), "2 checks and 4 pairs of check and region for 5 entries") {
		t.Errorf("a table too small: %v", err)
	}
}

// shiftAgg is an aggregator of regionConfig, with web1 and web2 healthy.
type shiftAgg struct {
	t   *testing.T
	a   *health.Aggregator
	x   *health.Index
	out *memSink
	log *health.EventLog
	now time.Time
}

func newShiftAgg(t *testing.T, seed health.Seed) *shiftAgg {
	t.Helper()
	cfg := regionConfig()
	x, err := health.AssignConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &shiftAgg{t: t, x: x, out: &memSink{}, log: &health.EventLog{}, now: time.Unix(1000, 0)}
	if g.a, err = health.New(cfg, x, g.out, seed, g.log); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *shiftAgg) push() {
	g.t.Helper()
	if err := g.a.Push(g.now); err != nil {
		g.t.Fatal(err)
	}
}

// entry is the state and reason name of the entry candidates of check in
// region read, as the last push wrote it.
func (g *shiftAgg) entry(check, region string) string {
	g.t.Helper()
	i, ok := g.x.AnswerEntry(check, region)
	if !ok {
		g.t.Fatalf("%q in %q: no entry", check, region)
	}
	state := "down"
	if healthtable.Up(g.out.table, i) {
		state = "up"
	}
	return state + " " + health.ReasonName(healthtable.Reason(g.out.table, i))
}

// want checks the entries of web1 in r1 and r2, web2 in r2, no check in
// r1 and web1 alone.
func (g *shiftAgg) want(when string, web1r1, web1r2, web2r2, noneR1, web1 string) {
	g.t.Helper()
	got := []string{g.entry("web1", "r1"), g.entry("web1", "r2"), g.entry("web2", "r2"), g.entry("", "r1"), g.entry("web1", "")}
	if want := []string{web1r1, web1r2, web2r2, noneR1, web1}; !slices.Equal(got, want) {
		g.t.Errorf("%s: web1@r1, web1@r2, web2@r2, -@r1, web1 = %q, want %q", when, got, want)
	}
}

func TestShiftTakesRegionOut(t *testing.T) {
	g := newShiftAgg(t, health.Seed{})
	g.push()
	g.want("no shift", "up no_results", "up no_results", "up no_results", "up static", "up no_results")

	// An admin override on the check reaches its derived entries.
	if err := g.a.SetAdmin("web1", health.AdminDown); err != nil {
		t.Fatal(err)
	}
	g.push()
	g.want("web1 set down", "down admin_down", "down admin_down", "up no_results", "up static", "down admin_down")
	if err := g.a.SetAdmin("web1", health.AdminAuto); err != nil {
		t.Fatal(err)
	}

	if err := g.a.Shift(health.Shift{Region: "r1", Reason: "INC-1: r1 packet loss", Who: "alice", Started: g.now, Expires: g.now.Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	g.push()
	g.want("r1 shifted", "down shifted", "up no_results", "up no_results", "down shifted", "up no_results")
	if got := g.a.Shifts(g.now); len(got) != 1 || got[0].Region != "r1" || got[0].Who != "alice" || !got[0].Expires.Equal(g.now.Add(30*time.Minute)) {
		t.Errorf("shifts %+v", got)
	}

	if err := g.a.Unshift("r1", "bob", g.now); err != nil {
		t.Fatal(err)
	}
	g.push()
	g.want("r1 unshifted", "up no_results", "up no_results", "up no_results", "up static", "up no_results")
	if got := g.a.Shifts(g.now); len(got) != 0 {
		t.Errorf("shifts after cancelling %+v", got)
	}

	// A shift expires by itself at its end, not before.
	if err := g.a.Shift(health.Shift{Region: "r2", Reason: "drill", Who: "alice", Started: g.now, Expires: g.now.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	g.now = g.now.Add(time.Second)
	g.push()
	g.want("r2 shifted", "up no_results", "down shifted", "down shifted", "up static", "up no_results")
	g.now = g.now.Add(time.Second)
	g.push()
	g.want("r2's shift expired", "up no_results", "up no_results", "up no_results", "up static", "up no_results")

	var got []string
	for _, e := range g.log.Events() {
		if e.Region != "" {
			got = append(got, e.Region+" "+e.From+"→"+e.To+" "+e.Reason+": "+e.Detail)
		}
	}
	want := []string{
		"r1 serving→shifted shifted: INC-1: r1 packet loss (by alice, until 1970-01-01T00:46:40Z)",
		"r1 shifted→serving cancelled: by bob; it was INC-1: r1 packet loss (by alice)",
		"r2 serving→shifted shifted: drill (by alice, until 1970-01-01T00:16:42Z)",
		"r2 shifted→serving expired: it was drill (by alice)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
}

func TestShiftRefusals(t *testing.T) {
	g := newShiftAgg(t, health.Seed{})
	at := func(d time.Duration, reason string) health.Shift {
		return health.Shift{Region: "r1", Reason: reason, Who: "alice", Started: g.now, Expires: g.now.Add(d)}
	}
	for _, c := range []struct {
		name string
		s    health.Shift
		want string // "" for accepted
	}{
		{"shortest", at(health.MinShift, "x"), ""},
		{"longest", at(health.MaxShift, "x"), ""},
		{"too short", at(health.MinShift-time.Millisecond, "x"), "shifting r1 away: duration 999ms is outside 1s to 72h0m0s"},
		{"too long", at(health.MaxShift+time.Second, "x"), "shifting r1 away: duration 72h0m1s is outside 1s to 72h0m0s"},
		{"no reason", at(time.Minute, " "), "shifting r1 away: a reason is required: it shows in the events and in status"},
		{"long reason", at(time.Minute, strings.Repeat("x", health.MaxShiftReason+1)), "shifting r1 away: the reason is 65 bytes, at most 64"},
		{"control in reason", at(time.Minute, "a\nb"), "shifting r1 away: the reason holds control characters"},
		{"unknown region", health.Shift{Region: "r9", Reason: "x", Started: g.now, Expires: g.now.Add(time.Minute)}, "shifting r9 away: no such region in server.geo.regions"},
	} {
		err := g.a.Shift(c.s)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%s: %q, want %q", c.name, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s: accepted, want %q", c.name, c.want)
		}
	}
	if err := g.a.Unshift("r2", "bob", g.now); !errors.Is(err, health.ErrNotShifted) {
		t.Errorf("cancelling no shift: %v", err)
	}
	if err := g.a.Unshift("r9", "bob", g.now); !errors.Is(err, health.ErrUnknownRegion) {
		t.Errorf("cancelling a shift of an unknown region: %v", err)
	}
}

func TestShiftSeeded(t *testing.T) {
	now := time.Unix(1000, 0)
	seed := health.Seed{Shifts: []health.Shift{
		{Region: "r1", Reason: "kept", Who: "alice", Started: now.Add(-time.Hour), Expires: now.Add(time.Hour)},
		{Region: "r2", Reason: "ended while down", Who: "alice", Started: now.Add(-time.Hour), Expires: now.Add(-time.Minute)},
		{Region: "gone", Reason: "a region the config dropped", Who: "alice", Started: now, Expires: now.Add(time.Hour)},
	}}
	g := newShiftAgg(t, seed)
	g.push()
	g.want("seeded", "down shifted", "up no_results", "up no_results", "down shifted", "up no_results")
	if got := g.a.Shifts(g.now); len(got) != 1 || got[0] != seed.Shifts[0] {
		t.Errorf("shifts %+v, want only r1's", got)
	}
	if evs := g.log.Events(); len(evs) != 1 || evs[0].Region != "r2" || evs[0].Reason != "expired" {
		t.Errorf("events %+v, want r2's expiry", evs)
	}
	if r := bpf.SteadydnsHealthReasonREASON_SHIFTED; health.ReasonName(uint8(r)) != "shifted" {
		t.Errorf("reason %d named %q", r, health.ReasonName(uint8(r)))
	}
}

// TestAliasTargetFollowsShifts: an alias with evaluate_target_health is
// healthy while an answer of its target is, as that answer reads its
// entry: once every region of the target's answers is shifted away, the
// alias is down with them.
func TestAliasTargetFollowsShifts(t *testing.T) {
	alias := config.TargetCheckID("lb.example.test.", dns.TypeA)
	cfg := regionConfig(
		config.Record{Name: "lb.example.test.", Type: dns.TypeA, Answers: []config.Answer{{Check: "web1", Region: "r1"}, {Check: "web2", Region: "r2"}}},
		config.Record{Name: "example.test.", Type: dns.TypeA, Answers: []config.Answer{{Alias: "lb.example.test.", EvaluateTargetHealth: true}}},
	)
	cfg.Checks = checksOf([]string{"web1", "web2", alias}, map[string]*config.Check{"web1": tcp(1, 1), "web2": tcp(1, 1),
		alias: {Type: config.CheckCalculated, Children: []string{"web1", "web2"}, MinHealthy: 1, Admin: health.AdminAuto}})
	x, err := health.AssignConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &shiftAgg{t: t, x: x, out: &memSink{}, log: &health.EventLog{}, now: time.Unix(1000, 0)}
	if g.a, err = health.New(cfg, x, g.out, health.Seed{}, g.log); err != nil {
		t.Fatal(err)
	}
	up := func() bool {
		g.push()
		i, _ := x.Entry(alias)
		return healthtable.Up(g.out.table, i)
	}
	shift := func(region string) {
		if err := g.a.Shift(health.Shift{Region: region, Reason: "drill", Who: "alice", Started: g.now, Expires: g.now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if !up() {
		t.Fatal("alias down with both regions serving")
	}
	shift("r1")
	if !up() {
		t.Error("alias down with r2's answer serving")
	}
	shift("r2")
	if up() {
		t.Error("alias up with every answer of its target shifted away")
	}
	if err := g.a.Unshift("r1", "bob", g.now); err != nil {
		t.Fatal(err)
	}
	if !up() {
		t.Error("alias down after r1 came back")
	}
}
