package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestLineIndex: every key path of a loaded config finds its own line,
// a key the file does not have finds none, and an error at a missing key
// lands on its nearest ancestor's line.
func TestLineIndex(t *testing.T) {
	var b strings.Builder
	b.WriteString(base + "health_checks:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  c%02d: {type: tcp, port: %d}\n", i, 1000+i)
	}
	c, err := load(t, b.String())
	if err != nil {
		t.Fatal(err)
	}
	first := c.Line("health_checks.c00")
	if first == 0 {
		t.Fatal("health_checks.c00 has no line")
	}
	for i := range 50 {
		for _, k := range []string{fmt.Sprintf("health_checks.c%02d", i), fmt.Sprintf("health_checks.c%02d.port", i), fmt.Sprintf("health_checks.c%02d.type", i)} {
			if got := c.Line(k); got != first+i {
				t.Errorf("Line(%s) = %d, want %d", k, got, first+i)
			}
		}
	}
	for _, k := range []string{"health_checks.c50", "health_checks.c07.path", "a", "zzz", "health_checks.c0"} {
		if got := c.Line(k); got != 0 {
			t.Errorf("Line(%s) = %d, want 0", k, got)
		}
	}
	if got := c.Errorf("health_checks.c07.path", "x").Line; got != first+7 {
		t.Errorf("an error at a missing key is at line %d, want its check's %d", got, first+7)
	}
}

// TestServed: a served config is the config without its lines: the same
// values and hash, errors that name the file and key at no line, and the
// config it came from keeps its lines.
func TestServed(t *testing.T) {
	c, err := load(t, base+"health_checks:\n  web: {type: tcp, port: 80}\n")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Served()
	if s.Hash != c.Hash || s.File != c.File || s.Checks.Len() != 1 || s.Checks.ID(0) != "web" {
		t.Errorf("served config %+v differs from %+v", s, c)
	}
	if s.Line("health_checks.web.port") != 0 {
		t.Error("a served config keeps its lines")
	}
	if e := s.Errorf("health_checks.web.port", "x"); e.File != c.File || e.Key != "health_checks.web.port" || e.Line != 0 {
		t.Errorf("error from a served config: %+v", e)
	}
	if c.Line("health_checks.web.port") == 0 {
		t.Error("serving a config took the lines of the original")
	}
}
