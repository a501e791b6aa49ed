package daemon

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// fdReserve are the file descriptors counted for everything but TCP
// clients: sockets per CPU, maps, the API's and the prober's connections.
const fdReserve = 256

// warnFileLimit warns when the process may run out of file descriptors
// before the fallback reaches its TCP limit: accepts would then fail and
// clients wait in the backlog instead of an idle connection making room.
func warnFileLimit(maxConns int) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		slog.Warn("reading RLIMIT_NOFILE", "error", err)
		return
	}
	if uint64(maxConns)+fdReserve > lim.Cur {
		slog.Warn("server.tcp.max_connections is above what the file descriptor limit leaves for TCP clients: raise RLIMIT_NOFILE (LimitNOFILE= in systemd) or lower it",
			"max_connections", maxConns, "rlimit_nofile", lim.Cur, "reserved", fdReserve)
	}
}
