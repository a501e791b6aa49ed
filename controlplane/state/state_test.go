package state_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/history"
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
		Shifts: []health.Shift{{Region: "r1", Reason: "INC-1", Who: "alice", Started: now, Expires: now.Add(30 * time.Minute)}},
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
	if out.Version != state.Version || !reflect.DeepEqual(out.Checks, in.Checks) || !reflect.DeepEqual(out.Shifts, in.Shifts) || !out.Written.Equal(in.Written) {
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

// asOwner runs f on a thread without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH, so file modes bind root as they bind the service's
// user; the test's other threads keep them.
func asOwner(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		f()
		return
	}
	errs := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, and the
		// capabilities it dropped with it.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errs <- fmt.Errorf("reading capabilities: %w", err)
			return
		}
		data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errs <- fmt.Errorf("dropping capabilities: %w", err)
			return
		}
		f()
		errs <- nil
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// corruptions are state files a start cannot use. Each makes one in dir
// and returns its content, which must be found again where it is moved.
var corruptions = map[string]struct {
	make func(t *testing.T, dir string) string
	want string // in the error
}{
	"garbage": {func(t *testing.T, dir string) string { return writeState(t, dir, "\x00\x01not json", 0o600) }, "decoding the state file"},
	"truncated": {func(t *testing.T, dir string) string {
		return writeState(t, dir, `{"Version":1,"Checks":{"web1":`, 0o600)
	}, "unexpected end of JSON input"},
	"version":    {func(t *testing.T, dir string) string { return writeState(t, dir, `{"Version":2}`, 0o600) }, "format version 2"},
	"unreadable": {func(t *testing.T, dir string) string { return writeState(t, dir, `{"Version":1}`, 0) }, "permission denied"},
	"directory": {func(t *testing.T, dir string) string {
		if err := os.Mkdir(state.Path(dir), 0o700); err != nil {
			t.Fatal(err)
		}
		return writeState(t, state.Path(dir), "inside", 0o600)
	}, "is a directory"},
}

func writeState(t *testing.T, dir, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(state.Path(dir), []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return content
}

// movedContent is what is at path, moved aside: a file's bytes, or those
// of the state file in a directory.
func movedContent(t *testing.T, path string) string {
	t.Helper()
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = state.Path(path)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRecoverRefuses: a state file a start cannot use is an error naming
// the file, what is wrong with it and where it went; it is moved aside
// whole, not replaced. A start after that, its file missing, is refused
// too, as a supervisor would restart it.
func TestRecoverRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for name, c := range corruptions {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			before := c.make(t, dir)
			var err error
			asOwner(t, func() { _, _, err = state.Recover(dir, false, now) })
			aside := state.Path(dir) + ".corrupt-1800000000"
			if err == nil || !strings.Contains(err.Error(), state.Path(dir)) || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), aside) || !strings.Contains(err.Error(), "--reset-state") {
				t.Fatalf("recover: %v, want an error naming %s, %q and %s", err, state.Path(dir), c.want, aside)
			}
			if _, err := os.Lstat(state.Path(dir)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the state file is still there (%v)", err)
			}
			if got := movedContent(t, aside); got != before {
				t.Errorf("moved aside: %q, want %q as it was", got, before)
			}

			_, _, err = state.Recover(dir, false, now.Add(time.Second))
			if err == nil || !strings.Contains(err.Error(), aside) || !strings.Contains(err.Error(), "missing") {
				t.Errorf("the next start: %v, want it refused naming %s", err, aside)
			}
		})
	}
}

// TestRecoverReset: with reset, a state file a start cannot use is moved
// aside and the start goes on without it, told where the file went and
// what was wrong; so does a start whose file an earlier one moved aside.
// A second file moved aside in the same second does not replace the
// first. The next Save writes a good file, and a good file is read
// whatever reset says.
func TestRecoverReset(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	dir := t.TempDir()
	first := corruptions["truncated"].make(t, dir)
	f, aside, err := state.Recover(dir, true, now)
	want := state.Path(dir) + ".corrupt-1800000000"
	if err != nil || len(f.Checks) != 0 || len(f.Events) != 0 || aside == nil || aside.Path != want ||
		!strings.Contains(aside.Err.Error(), "unexpected end of JSON input") {
		t.Fatalf("recover with reset: %+v, %+v, %v; want an empty file and %s moved aside", f, aside, err, want)
	}
	if got := movedContent(t, want); got != first {
		t.Errorf("moved aside: %q, want %q", got, first)
	}

	// An earlier start moved the file aside: the start with reset says
	// which file that was.
	if f, aside, err = state.Recover(dir, true, now); err != nil || len(f.Checks) != 0 || aside == nil || aside.Path != want {
		t.Errorf("recover of a missing file moved aside before: %+v, %+v, %v; want %s named", f, aside, err, want)
	}

	second := corruptions["garbage"].make(t, dir)
	if _, aside, err = state.Recover(dir, true, now); err != nil || aside == nil || aside.Path != want+".1" {
		t.Fatalf("a second file moved aside in the same second: %+v, %v; want it at %s.1", aside, err, want)
	}
	if movedContent(t, want) != first || movedContent(t, want+".1") != second {
		t.Error("a file moved aside was replaced")
	}

	if err := state.Save(dir, sample()); err != nil {
		t.Fatal(err)
	}
	for _, reset := range []bool{false, true} {
		if f, aside, err := state.Recover(dir, reset, now); err != nil || aside != nil || len(f.Checks) != 3 {
			t.Errorf("recover of a good file, reset %v: %d checks, %+v, %v; want the file read", reset, len(f.Checks), aside, err)
		}
	}
}

// TestRecoverFirstStart: no file and none moved aside is a first start,
// with or without reset.
func TestRecoverFirstStart(t *testing.T) {
	for _, reset := range []bool{false, true} {
		if f, aside, err := state.Recover(filepath.Join(t.TempDir(), "new"), reset, time.Now()); err != nil || aside != nil || len(f.Checks) != 0 {
			t.Errorf("first start, reset %v: %+v, %+v, %v; want an empty file", reset, f, aside, err)
		}
	}
}

// TestRecoverCannotMove: a file that cannot be moved aside is an error
// that says so, with or without reset, and the file stays as it was.
func TestRecoverCannotMove(t *testing.T) {
	for _, reset := range []bool{false, true} {
		dir := t.TempDir()
		before := corruptions["unreadable"].make(t, dir)
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		var err error
		asOwner(t, func() { _, _, err = state.Recover(dir, reset, time.Now()) })
		if err == nil || !strings.Contains(err.Error(), "moving the state file "+state.Path(dir)+" aside") || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("reset %v: %v, want an error saying the file could not be moved aside", reset, err)
		}
		os.Chmod(dir, 0o700)
		if got := movedContent(t, state.Path(dir)); got != before {
			t.Errorf("reset %v: the file holds %q, want %q", reset, got, before)
		}
	}
}

// TestHistoryRoundTrip: what SaveHistory writes LoadHistory reads back;
// no file is no history, and a file of another version an error naming
// it.
func TestHistoryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if h, err := state.LoadHistory(dir); h != nil || err != nil {
		t.Fatalf("no file: %v, %v; want nothing", h, err)
	}
	in := map[string]history.Series{"web1": {Fine: []history.Bucket{{1_800_000_000, 2, 1, 300, 200}}, Coarse: []history.Bucket{{1_800_000_000, 2, 1, 300, 200}}}}
	if err := state.SaveHistory(dir, in, time.Unix(1_800_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	out, err := state.LoadHistory(dir)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("loaded %v, %v; want %v", out, err, in)
	}
	path := filepath.Join(dir, "history.json")
	os.WriteFile(path, []byte(`{"Version":9}`), 0o600)
	if _, err := state.LoadHistory(dir); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("version 9: %v, want an error naming %s and the version", err, path)
	}
}
