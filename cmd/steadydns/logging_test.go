package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"strings"
	"testing"
)

// TestLogJSON: with --log-format json every line, slog's and the standard
// log package's, is a JSON object with the level, message and attributes;
// --log-level drops what is below it; an unknown format or level is refused.
func TestLogJSON(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var buf bytes.Buffer
	if err := setupLogging(&buf, logFlags{format: "json", level: "warn"}); err != nil {
		t.Fatal(err)
	}
	slog.Info("dropped below warn")
	slog.Warn("xdp attached", "interface", "eth0", "error", errors.New("boom"))
	slog.Error("reload rejected")
	log.Print("from the standard log package")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 2 {
		t.Fatalf("got %d lines at warn and above, want 2 (the standard log package logs at info):\n%s", len(got), buf.String())
	}
	if got[0]["level"] != "WARN" || got[0]["msg"] != "xdp attached" || got[0]["interface"] != "eth0" || got[0]["error"] != "boom" {
		t.Errorf("first line %v, want level WARN, msg, interface and error", got[0])
	}
	if got[1]["level"] != "ERROR" {
		t.Errorf("second line %v, want level ERROR", got[1])
	}

	buf.Reset()
	if err := setupLogging(&buf, logFlags{format: "text", level: "debug"}); err != nil {
		t.Fatal(err)
	}
	log.Print("from the standard log package")
	if !strings.Contains(buf.String(), `level=INFO msg="from the standard log package"`) {
		t.Errorf("text at debug: %q, want the standard log package's line as an INFO record", buf.String())
	}

	for _, f := range []logFlags{{format: "xml", level: "info"}, {format: "json", level: "loud"}} {
		if err := setupLogging(&buf, f); err == nil {
			t.Errorf("setupLogging(%+v) accepted it", f)
		}
	}
}
