// Package state keeps what a restart must not lose in one file: every
// check's health state by id, admin overrides, external reports, traffic
// shifts and the health-check log. The XDP maps outlive the process in bpffs, but only
// for as long as their layout stays; this file outlives any layout.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steadydns/steadydns/controlplane/health"
	"github.com/steadydns/steadydns/controlplane/history"
)

// Version is the file's format. A file of another version is not read:
// Recover treats it as a corrupt file.
const Version = 1

// MaxBytes bounds the file. A reader refuses a larger one rather than
// holding it in memory, and a writer refuses to write one: at most 64 MiB
// is over 200,000 checks at their longest.
const MaxBytes = 64 << 20

// maxDetail bounds each event's detail in the file: a prober's detail
// can quote what a backend sent.
const maxDetail = 256

// name is the file's name in server.state_dir.
const name = "state.json"

// File is the file's content.
type File struct {
	Version int
	Written time.Time
	Checks  map[string]health.Saved // by check id
	Events  []health.Event          // oldest first
	Shifts  []health.Shift          `json:",omitempty"` // in force when written, by region
}

// Path is the file in dir.
func Path(dir string) string { return filepath.Join(dir, name) }

// Load reads the file in dir. A missing file is an empty File: the first
// start. A file that cannot be read, does not decode, is of another
// version or too large is an error naming the file; a start reads it with
// Recover, which decides what such a file means.
func Load(dir string) (File, error) {
	f, _, err := load(dir)
	return f, err
}

// load is Load that says whether there was a file.
func load(dir string) (_ File, found bool, _ error) {
	f, err := read(Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return File{Version: Version}, false, nil
	}
	return f, true, err
}

// read reads and decodes the file at path; a missing file's error is
// fs.ErrNotExist.
func read(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("reading the state file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("reading the state file %s: %w", path, err)
	}
	if len(b) > MaxBytes {
		return File{}, fmt.Errorf("reading the state file %s: larger than %d bytes", path, MaxBytes)
	}
	// The version first, so a file of another format is named as such
	// rather than as whatever its fields fail to decode into.
	var v struct{ Version int }
	if err := json.Unmarshal(b, &v); err != nil {
		return File{}, fmt.Errorf("decoding the state file %s: %w", path, err)
	}
	if v.Version != Version {
		return File{}, fmt.Errorf("reading the state file %s: format version %d, this build reads %d", path, v.Version, Version)
	}
	var out File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return File{}, fmt.Errorf("decoding the state file %s: %w", path, err)
	}
	return out, nil
}

// Save writes f as the file in dir, creating dir if needed. It writes a
// temporary file, syncs it and renames it over the old one, so a crash
// at any point leaves the old file or the new one, never part of either.
func Save(dir string, f File) error {
	f.Version = Version
	f.Events = append([]health.Event(nil), f.Events...)
	for i := range f.Events {
		if d := f.Events[i].Detail; len(d) > maxDetail {
			f.Events[i].Detail = d[:maxDetail]
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding the state file: %w", err)
	}
	if len(b) > MaxBytes {
		return fmt.Errorf("writing the state file: %d bytes, more than %d", len(b), MaxBytes)
	}
	return write(dir, name, b)
}

// write writes b as the file name in dir, making dir if needed, through
// a temporary file that is synced and renamed over the old one, so a
// crash at any point leaves the old file or the new one.
func write(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	// The rename is durable once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing the state directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the state directory: %w", err)
	}
	return nil
}

// asidePrefix starts the name of a file Recover moved aside, followed by
// the time it did, in unix seconds.
const asidePrefix = name + ".corrupt-"

// Aside is a state file that a start could not use, moved aside.
type Aside struct {
	Path string // where the file is now
	Err  error  // what was wrong with it
}

// Recover reads the file in dir for a start. A file that cannot be used
// is moved aside, beside it, never replaced: without reset that is an
// error naming the file and where it went, so a server never starts as if
// every check were healthy when its state is lost. A missing file is a
// first start, unless an earlier start moved one aside: a supervisor that
// restarts a refused server must meet the same refusal. With reset, both
// are an empty File and the Aside to warn of.
func Recover(dir string, reset bool, now time.Time) (File, *Aside, error) {
	f, found, err := load(dir)
	if !found {
		earlier, err := lastAside(dir)
		if err != nil || earlier == "" {
			return f, nil, err
		}
		a := &Aside{Path: earlier, Err: fmt.Errorf("%s is missing, and an earlier start moved a corrupt one aside", Path(dir))}
		if reset {
			return f, a, nil
		}
		return File{}, nil, fmt.Errorf("restoring state: %w to %s; --reset-state starts without it", a.Err, earlier)
	}
	if err == nil {
		return f, nil, nil
	}
	to, merr := moveAside(dir, now)
	if merr != nil {
		return File{}, nil, errors.Join(fmt.Errorf("restoring state: %w", err), merr)
	}
	if reset {
		return File{Version: Version}, &Aside{Path: to, Err: err}, nil
	}
	return File{}, nil, fmt.Errorf("restoring state (the file is moved aside to %s; --reset-state starts without it): %w", to, err)
}

// moveAside renames the file in dir to asidePrefix and now's unix time,
// with a count after it if a file of that name exists: a moved file is
// never replaced.
func moveAside(dir string, now time.Time) (string, error) {
	base := filepath.Join(dir, fmt.Sprintf("%s%d", asidePrefix, now.Unix()))
	to := base
	for n := 1; ; n++ {
		err := unix.Renameat2(unix.AT_FDCWD, Path(dir), unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
		if err == nil {
			return to, nil
		}
		if !errors.Is(err, unix.EEXIST) || n == 100 {
			return "", fmt.Errorf("moving the state file %s aside to %s: %w", Path(dir), to, err)
		}
		to = fmt.Sprintf("%s.%d", base, n)
	}
}

// lastAside is the newest file moved aside in dir, or "" for none.
func lastAside(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the state directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), asidePrefix) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	// Unix times of the same number of digits sort as strings; a count
	// after one sorts after it.
	return filepath.Join(dir, slices.Max(names)), nil
}

// historyName is the history file's name in server.state_dir.
const historyName = "history.json"

// historyVersion is the history file's format.
const historyVersion = 1

// History is the history file's content: each check's results, by id.
// It is kept apart from the state file, which is written on every
// change: the history is larger and written less often.
type History struct {
	Version int
	Written time.Time
	Checks  map[string]history.Series
}

// SaveHistory writes checks' series as the history file in dir, as Save
// writes the state file.
func SaveHistory(dir string, checks map[string]history.Series, now time.Time) error {
	b, err := json.Marshal(History{Version: historyVersion, Written: now, Checks: checks})
	if err != nil {
		return fmt.Errorf("encoding the history file: %w", err)
	}
	if len(b) > MaxBytes {
		return fmt.Errorf("writing the history file: %d bytes, more than %d", len(b), MaxBytes)
	}
	return write(dir, historyName, b)
}

// LoadHistory reads the history file in dir; a missing one is no
// history. Unlike the state file's, a history file that cannot be used
// is an error the caller may start without: no answer depends on it.
func LoadHistory(dir string) (map[string]history.Series, error) {
	path := filepath.Join(dir, historyName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the history file %s: %w", path, err)
	case len(b) > MaxBytes:
		return nil, fmt.Errorf("reading the history file %s: larger than %d bytes", path, MaxBytes)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("decoding the history file %s: %w", path, err)
	}
	if h.Version != historyVersion {
		return nil, fmt.Errorf("reading the history file %s: format version %d, this build reads %d", path, h.Version, historyVersion)
	}
	return h.Checks, nil
}
