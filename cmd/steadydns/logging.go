package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logFlags are serve's --log-format and --log-level.
type logFlags struct {
	format string
	level  string
}

// setupLogging makes a slog handler of the format and level asked for the
// process's default, so every package's slog calls, and anything written
// through the standard log package (net/http's server errors among them),
// come out in one format.
func setupLogging(w io.Writer, f logFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil {
		return fmt.Errorf("--log-level: %q is not debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch strings.ToLower(f.format) {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return fmt.Errorf("--log-format: %q is not text or json", f.format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}
