package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
)

// SkipUnlessRoot skips t, saying why, when the test cannot create namespaces.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("testenv needs root to create network namespaces (running as uid %d)", uid)
	}
}

// UniquePrefix returns a fresh prefix ("t" and six hex digits), so tests in
// parallel, even in different packages, never share names.
func UniquePrefix() string {
	var b [3]byte
	rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// Start builds an environment for a test and removes it when the test ends,
// passed or failed. It skips the test when not root. An empty opts.Prefix
// gets a UniquePrefix rather than the default.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	SkipUnlessRoot(t)
	if opts.Prefix == "" {
		opts.Prefix = UniquePrefix()
	}
	e, err := New(opts)
	if err != nil {
		t.Fatalf("creating testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("closing testenv: %v", err)
		}
	})
	return e
}

// StartFleet builds a fleet for a test and removes it when the test ends,
// passed or failed, as Start does for the single-edge topology.
func StartFleet(t testing.TB, opts FleetOptions) *Fleet {
	t.Helper()
	SkipUnlessRoot(t)
	if opts.Prefix == "" {
		opts.Prefix = UniquePrefix()
	}
	f, err := NewFleet(opts)
	if err != nil {
		t.Fatalf("creating fleet: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("closing fleet: %v", err)
		}
	})
	return f
}
