package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWarnFileLimit: the start warns when the file descriptor limit leaves
// fewer than server.tcp.max_connections for TCP clients, and only then.
func TestWarnFileLimit(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = min(lim.Max, 1000)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	var log bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))

	warnFileLimit(int(low.Cur) - fdReserve)
	if log.Len() != 0 {
		t.Errorf("warned with room for every connection: %s", log.String())
	}
	warnFileLimit(int(low.Cur))
	if got := log.String(); !strings.Contains(got, "server.tcp.max_connections") || !strings.Contains(got, fmt.Sprintf("rlimit_nofile=%d", low.Cur)) {
		t.Errorf("warning %q, want one naming server.tcp.max_connections and the limit", got)
	}
}
