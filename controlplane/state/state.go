// Package state keeps what a restart must not lose in one file: every
// check's health state by id, admin overrides, external reports and the
// health-check log. The XDP maps outlive the process in bpffs, but only
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
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// Version is the file's format. A file of another version is not read:
// the server starts without it, as after a corrupt file.
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
}

// Path is the file in dir.
func Path(dir string) string { return filepath.Join(dir, name) }

// Load reads the file in dir. A missing file is an empty File: the first
// start. A file that does not decode, of another version or too large is
// an error; the caller starts without it, and the next Save replaces it.
func Load(dir string) (File, error) {
	path := Path(dir)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{Version: Version}, nil
	}
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return fmt.Errorf("writing the state file: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), Path(dir))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing the state file: %w", err)
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
