package app

import (
	"log/slog"
	"syscall"
)

// The listener holds at most maxConnections connections at once (OWED_MAX_CONNECTIONS;
// netutil.LimitListener in Serve): past it, new connections wait in the kernel's backlog until
// one ends, instead of the process running out of file descriptors (accept4: too many open
// files), which would leave /healthz and the admin unanswered. The streams and long polls of
// `mine` are capped below it (streamsUnder), so whatever they do there is room for the rest.

// maxConnections is the configured cap, or by default the open-file limit less a tenth of it
// (at least 256 kept for the database, the preview cache and the log).
func maxConnections(configured int64) int64 {
	if configured > 0 {
		return configured
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<24 {
		return 10000
	}
	n := int64(rl.Cur)
	return max(n-max(n/10, 256), 64)
}

// streamsUnder is OWED_MAX_STREAMS, lowered if need be to leave a tenth of the connections
// (at least 4) to everything else.
func streamsUnder(maxStreams, configuredConns int64, log *slog.Logger) int {
	conns := maxConnections(configuredConns)
	room := conns - max(conns/10, 4)
	if maxStreams > room {
		log.Warn("OWED_MAX_STREAMS lowered to leave connections for everything else", "maxStreams", maxStreams, "maxConnections", conns, "now", room)
		return int(max(room, 1))
	}
	return int(maxStreams)
}
