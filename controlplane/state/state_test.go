package state_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/state"
)

func sample() state.File {
	now := time.Unix(1_800_000_000, 0).UTC()
	return state.File{
		Written: now,
		Checks: map[string]health.Saved{
			"web1": {State: false, Up: false, Reason: 3, Since: now.Add(-time.Minute)},
			"web2": {State: true, Up: false, Reason: 0x81, Since: now, Admin: health.AdminDown},
			"ext":  {State: true, Up: true, Since: now, External: &health.SavedExternal{Up: true, Expires: now.Add(time.Minute)}},
		},
		Events: []health.Event{{Time: now, Check: "web1", From: "healthy", To: "unhealthy", Reason: "refused", Detail: strings.Repeat("x", 1000)}},
	}
}

// TestRoundTrip: what Save writes, Load reads back, with each event's
// detail bounded; no temporary file stays behind.
func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new") // Save makes it
	in := sample()
	if err := state.Save(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := state.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out.Version != state.Version || !reflect.DeepEqual(out.Checks, in.Checks) || !out.Written.Equal(in.Written) {
		t.Errorf("loaded %+v, want %+v", out, in)
	}
	if len(out.Events) != 1 || len(out.Events[0].Detail) != 256 || out.Events[0].Check != "web1" {
		t.Errorf("events %+v: want the one event, its detail cut to 256 bytes", out.Events)
	}
	if len(in.Events[0].Detail) != 1000 {
		t.Error("Save changed the caller's events")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("state directory holds %v, want the state file alone", entries)
	}
}

// TestMissing: no file is a first start, not an error.
func TestMissing(t *testing.T) {
	f, err := state.Load(t.TempDir())
	if err != nil || len(f.Checks) != 0 || len(f.Events) != 0 {
		t.Errorf("load of no file: %+v, %v; want empty, no error", f, err)
	}
}

// TestUnreadable: a truncated file, garbage, another format version, an
// unknown field and an oversized file are errors naming the file, and a
// Save then replaces the file.
func TestUnreadable(t *testing.T) {
	good := t.TempDir()
	if err := state.Save(good, sample()); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(state.Path(good))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"truncated":   {whole[:len(whole)/2], "decoding the state file"},
		"garbage":     {[]byte("\x00\x01not json"), "decoding the state file"},
		"version":     {[]byte(`{"Version":2,"Checks":{}}`), "format version 2, this build reads 1"},
		"field":       {[]byte(`{"Version":1,"Slots":[1,2]}`), "unknown field"},
		"wrong type":  {[]byte(`{"Version":1,"Checks":{"web1":{"Up":"yes"}}}`), "decoding the state file"},
		"no version":  {[]byte(`{}`), "format version 0"},
		"over budget": {append([]byte(`{"Version":1,"Events":[`), make([]byte, state.MaxBytes)...), "larger than"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(state.Path(dir), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := state.Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), state.Path(dir)) {
				t.Fatalf("load: %v, want an error naming %s about %q", err, state.Path(dir), c.want)
			}
			if err := state.Save(dir, sample()); err != nil {
				t.Fatal(err)
			}
			if _, err := state.Load(dir); err != nil {
				t.Errorf("after a save over it: %v", err)
			}
		})
	}
}
