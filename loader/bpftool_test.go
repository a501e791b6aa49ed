package loader

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/steadydns/steadydns/bpf"
	"github.com/steadydns/steadydns/controlplane/healthtable"
)

// TestBpftoolDump dumps every pinned map with bpftool's JSON output, as an
// operator inspects a server, and finds each map's fields by name, the
// outcome counts by outcome: every map carries BTF the kernel took, and
// none prints as bare bytes.
func TestBpftoolDump(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("bpftool"); err != nil {
		t.Fatalf("bpftool is not installed (scripts/deps.sh installs it): %v", err)
	}
	dir := mountTestFS(t)
	o, err := Load(Options{BPFFS: dir + "/sd", HealthCapacity: 64, RecordCapacity: 16, Servers: []netip.Addr{netip.MustParseAddr("198.18.0.2")},
		RRL: RRL{Rate: 10, Slip: 2, Window: 15 * time.Second, IPv4Prefix: 24, IPv6Prefix: 56, Exempt: []netip.Prefix{netip.MustParsePrefix("198.18.9.0/24")}, TableSize: RRLTableMin}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	// One client's account, so that the rate limiting state has an entry.
	o.RRLAccount(netip.MustParseAddr("198.18.0.1"), RRLAnswer("\x03www\x07example\x04test\x00", 1), BootNs())
	if err := o.PutRecord(RecordKey{Wire: "\x03www\x07example\x04test\x00", Qtype: 1}, &bpf.SteadydnsRrset{Ttl: 30, N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := o.PutSig(bpf.SteadydnsSigKey{Hash: 1, Content: 2, Ttl: 30}, &bpf.SteadydnsSigValue{Len: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	v4 := map[bpf.SteadydnsGeoKey4]bpf.SteadydnsGeoMatch{{Prefixlen: 24, Addr: [4]byte{198, 18, 0, 0}}: {Region: 1, Prefixlen: 24}}
	v6 := map[bpf.SteadydnsGeoKey6]bpf.SteadydnsGeoMatch{{Prefixlen: 48, Addr: [16]byte{0xfd, 0x53}}: {Region: 1, Prefixlen: 48}}
	if err := o.SyncGeo(v4, v6, make([]bpf.SteadydnsGeoOrder, bpf.SteadydnsLimitsMAX_REGIONS)); err != nil {
		t.Fatal(err)
	}

	// Field names each map's dump must show.
	want := map[string][]string{
		"records":     {"seq", "state", "dist", "qtype", "hash", "name_head", "rr", "ttl", "policy", "cand", "addr", "check", "rr_sum", "packed", "ext"},
		"rec_exts":    {"rr", "ttl", "cand", "rr_sum", "pool", "name_tail"},
		"rec_pools":   {"rr_sum", "cand", "addr", "check", "weight", "priority", "region"},
		"health":      {"state", "reason"},
		"health_bits": {},
		"rec_size":    {},
		"health_meta": {"version", "config_hash", "arrived_ns", "stale_after_ns", "stale_mark"},
		"stale_timer": {"t"},
		"counters":    {"answered", "nodata", "servfail", "not_found", "truncated", "ecs"},
		"geo4":        {"prefixlen", "addr", "region"},
		"geo6":        {"prefixlen", "addr", "region"},
		"geo_rank":    {"rank"},
		"zones":       {"ttl", "rdlen", "apex_len", "rdata"},
		"rr_counter":  {},
		"scratch":     {"buf", "key", "q", "name_len", "draw", "pick"},
		"rrl":         {"way", "tag", "tat"},
		"rrl_clock":   {"t", "now", "seed"},
		"rrl_exempt":  {"prefixlen", "addr"},
		"sigs":        {"hash", "content", "ttl", "epoch", "len", "count", "sum", "rr"},
		"sig_epoch":   {},
		"sample_cpu":  {"left", "taken", "dropped", "rec", "client", "query_len", "data"},
		"samples":     {},
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var pinned []string
	for _, e := range entries {
		pinned = append(pinned, e.Name())
	}
	for name := range want {
		if !slices.Contains(pinned, name) {
			t.Errorf("map %s is not pinned in %s (%v)", name, o.Dir, pinned)
		}
	}
	for _, name := range pinned {
		fields, ok := want[name]
		if !ok {
			t.Errorf("map %s is pinned but not checked here: add its fields", name)
			continue
		}
		if name == "samples" {
			continue // a ring buffer: records to read, no entries to dump
		}
		out, err := exec.Command("bpftool", "-j", "map", "dump", "pinned", filepath.Join(o.Dir, name)).Output()
		if err != nil {
			t.Fatalf("bpftool map dump %s: %v", name, err)
		}
		var dump []map[string]json.RawMessage
		if err := json.Unmarshal(out, &dump); err != nil {
			t.Fatalf("%s: bpftool's output is not a JSON list: %v\n%.500s", name, err, out)
		}
		if len(dump) == 0 {
			t.Fatalf("%s: no entries dumped", name)
		}
		// With BTF bpftool adds each entry "formatted", the key and value
		// by their types; without, bytes alone.
		f, ok := dump[0]["formatted"]
		if !ok {
			t.Errorf("%s: dumped as bytes, without BTF:\n%.300s", name, out)
			continue
		}
		keys := map[string]bool{}
		collectKeys(t, f, keys)
		for _, field := range fields {
			if !keys[field] {
				t.Errorf("%s: no field %q in the dump: %.300s", name, field, f)
			}
		}
	}

	// A health entry's state by its enum's name: entry 0 is always up.
	if _, err := o.PushHealth(func() []byte {
		t := make([]byte, healthtable.Bytes(o.HealthCapacity()))
		healthtable.Put(t, 0, true, 0)
		return t
	}(), 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bpftool", "-j", "map", "lookup", "pinned", filepath.Join(o.Dir, "health"), "key", "0", "0", "0", "0").Output()
	if err != nil {
		t.Fatalf("bpftool map lookup health 0: %v", err)
	}
	if !strings.Contains(string(out), `"HEALTH_UP"`) {
		t.Errorf("health entry 0 does not show its state as HEALTH_UP: %s", out)
	}

	// Every outcome's count by its metric label.
	names, err := OutcomeNames()
	if err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("bpftool", "-j", "map", "dump", "pinned", filepath.Join(o.Dir, "counters")).Output()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	collectKeys(t, out, keys)
	for _, n := range names {
		if !keys[n] {
			t.Errorf("counters: outcome %q not in the dump", n)
		}
	}
}

// collectKeys adds every object key in the JSON value to keys.
func collectKeys(t *testing.T, raw json.RawMessage, keys map[string]bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
}

// TestOutcomeNames holds the counts' field names, the metric labels,
// against enum outcome: the program indexes the struct by the enum.
func TestOutcomeNames(t *testing.T) {
	names, err := OutcomeNames()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := bpf.LoadSteadydns()
	if err != nil {
		t.Fatal(err)
	}
	var e *btf.Enum
	if err := spec.Types.TypeByName("outcome", &e); err != nil {
		t.Fatal(err)
	}
	if len(names) != int(bpf.SteadydnsOutcomeOUT_MAX) {
		t.Fatalf("%d names, want %d", len(names), bpf.SteadydnsOutcomeOUT_MAX)
	}
	for _, v := range e.Values {
		if v.Value >= uint64(len(names)) {
			continue // OUT_MAX
		}
		if want := strings.ToLower(strings.TrimPrefix(v.Name, "OUT_")); names[v.Value] != want {
			t.Errorf("count %d is named %q, want %q as enum outcome's %s", v.Value, names[v.Value], want, v.Name)
		}
	}
}
