package app

import (
	"net"
	"syscall"

	"golang.org/x/net/netutil"
)

// limitListener caps the connections ln holds at once (OWED_MAX_CONNECTIONS; 0: the
// open-file limit less a tenth, at least 256 kept free): past it, new connections wait in the
// kernel's backlog until one ends, instead of the process running out of file descriptors
// (accept4: too many open files), which would leave /healthz and the admin unanswered. The
// streams and long polls of `mine` are capped lower (OWED_MAX_STREAMS), so the cap is reached
// only by connections that owed ends by its own timeouts.
func limitListener(ln net.Listener, max int64) net.Listener {
	if max <= 0 {
		max = defaultMaxConnections()
	}
	return netutil.LimitListener(ln, int(max))
}

// defaultMaxConnections is the open-file limit less a tenth of it (at least 256), for the
// database, the preview cache and the log.
func defaultMaxConnections() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<24 {
		return 10000
	}
	n := int64(rl.Cur)
	return max(n-max(n/10, 256), 64)
}
