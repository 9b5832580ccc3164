package app

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/owed/owed/api"
)

// The listener holds at most maxConnections connections (OWED_MAX_CONNECTIONS), so the process
// never runs out of file descriptors, and shares them out (slots): one client address holds
// at most its share (a trusted proxy's has none of its own); near the cap, idle connections
// are closed first, longest idle first; a new connection's ReadHeaderTimeout runs from its first
// byte, so a pooled connection dialled ahead is not cut under a client's request; a few slots
// above the cap (reserveOf) are kept for /healthz and /readyz; a connection with no room at all
// is closed at once rather than left in the backlog. Streams are capped below (streamsUnder).

// reserveLife is a reserved slot's connection's time for its request and answer (/readyz: 2 s).
const reserveLife = 3 * time.Second

// freshGrace is how long a new connection may idle before, near the cap, it may be closed.
const freshGrace = time.Second

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

// connectionsPerIP is the configured share of one client address, or a quarter of the cap.
func connectionsPerIP(configured, maxConns int64) int {
	if configured > 0 {
		return int(min(configured, maxConns))
	}
	return int(max(maxConns/4, 1))
}

// reserveOf is how many slots above the cap are kept for health checks.
func reserveOf(maxConns int) int { return max(4, maxConns/64) }

// streamsUnder is OWED_MAX_STREAMS, lowered to leave a tenth of the connections (at least 4).
func streamsUnder(maxStreams, configuredConns int64, log *slog.Logger) int {
	conns := maxConnections(configuredConns)
	room := conns - max(conns/10, 4)
	if maxStreams > room {
		log.Warn("OWED_MAX_STREAMS lowered to leave connections for everything else", "maxStreams", maxStreams, "maxConnections", conns, "now", room)
		return int(max(room, 1))
	}
	return int(maxStreams)
}

// slots is the listener's bookkeeping of connections.
type slots struct {
	max, perIP, reserve int
	exempt              func(net.IP) bool // addresses with no share of their own (trusted proxies)
	idleFor, header     time.Duration     // the server's IdleTimeout and ReadHeaderTimeout

	mu       sync.Mutex
	held     int            // connections on ordinary slots
	reserved int            // on reserved ones
	byIP     map[string]int // ordinary slots by address
	resByIP  map[string]int // reserved slots by address
	kept     *list.List     // connections waiting for their next request (*slotConn), longest first
	fresh    *list.List     // for their first, oldest first
}

func newSlots(maxConns, perIP int, exempt func(net.IP) bool, t ServerTimeouts) *slots {
	return &slots{max: maxConns, perIP: perIP, reserve: reserveOf(maxConns), exempt: exempt, idleFor: t.Idle,
		header: t.ReadHeader, byIP: map[string]int{}, resByIP: map[string]int{}, kept: list.New(), fresh: list.New()}
}

// slotListener is a listener whose connections hold slots.
type slotListener struct {
	net.Listener
	s *slots
}

// Accept returns the next connection that finds room, closing those that find none.
func (l slotListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc, idle := l.s.admit(c)
		if idle != nil {
			idle.Conn.Close() // its slot is already given back
		}
		if sc != nil {
			return sc, nil
		}
		c.Close()
	}
}

// admit gives c a slot, or nil when there is none for it; idle is a connection it let go to
// make room, for the caller to close.
func (s *slots) admit(c net.Conn) (sc *slotConn, idle *slotConn) {
	ip := peerIP(c)
	key := ip.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	mayHold := s.exempt(ip) || s.byIP[key] < s.perIP
	if mayHold && s.held >= s.max-s.reserve {
		idle = s.idlest(time.Now())
		if idle != nil {
			s.releaseLocked(idle)
		}
	}
	switch {
	case mayHold && s.held < s.max:
		s.held++
		s.byIP[key]++
		sc = &slotConn{Conn: c, s: s, key: key}
		s.waitLocked(sc, s.fresh)
		c.SetReadDeadline(time.Now().Add(s.idleFor))
		return sc, idle
	case s.reserved < s.reserve && s.resByIP[key] < max(1, s.reserve/2):
		s.reserved++
		s.resByIP[key]++
		end := time.Now().Add(reserveLife)
		c.SetDeadline(end)
		return &slotConn{Conn: c, s: s, key: key, end: end}, idle
	}
	return nil, idle
}

// releaseLocked gives sc's slot back, once.
func (s *slots) releaseLocked(sc *slotConn) {
	if sc.released {
		return
	}
	sc.released = true
	s.waitLocked(sc, nil)
	counts, n := s.byIP, &s.held
	if !sc.end.IsZero() {
		counts, n = s.resByIP, &s.reserved
	}
	*n--
	if counts[sc.key]--; counts[sc.key] <= 0 {
		delete(counts, sc.key)
	}
}

// connState follows the server's connections (http.Server.ConnState): an idle one may be closed
// to make room; one on a reserved slot ends after its one answer.
func (s *slots) connState(c net.Conn, st http.ConnState) {
	sc, ok := c.(*slotConn)
	if !ok {
		return
	}
	if st == http.StateIdle && sc.reservedSlot() {
		sc.Close()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sc.released, st == http.StateNew: // admit put it in fresh
	case st == http.StateIdle:
		s.waitLocked(sc, s.kept)
	default:
		s.waitLocked(sc, nil)
	}
}

// waitLocked moves sc to the end of the list of connections waiting as it does (nil: none).
func (s *slots) waitLocked(sc *slotConn, l *list.List) {
	if sc.waitIn == l {
		return
	}
	if sc.waitIn != nil {
		sc.waitIn.Remove(sc.waitAt)
	}
	sc.waitIn, sc.waitAt, sc.since = l, nil, time.Now()
	if l != nil {
		sc.waitAt = l.PushBack(sc)
	}
}

// idlest is the connection to close to make room: the longest kept alive, else the oldest new
// one past freshGrace.
func (s *slots) idlest(now time.Time) *slotConn {
	if e := s.kept.Front(); e != nil {
		return e.Value.(*slotConn)
	}
	if e := s.fresh.Front(); e != nil && now.Sub(e.Value.(*slotConn).since) > freshGrace {
		return e.Value.(*slotConn)
	}
	return nil
}

// slotConn is a connection holding a slot, given back when it is closed.
type slotConn struct {
	net.Conn
	s   *slots
	key string
	end time.Time // on a reserved slot: when the connection ends, whatever deadlines say

	released bool          // guarded by s.mu
	waitIn   *list.List    // s.kept or s.fresh while it waits for a request; guarded by s.mu
	waitAt   *list.Element // its place there
	since    time.Time     // when it began to wait
	begun    atomic.Bool   // its first byte has come
}

func (c *slotConn) reservedSlot() bool { return !c.end.IsZero() }

func (c *slotConn) Close() error {
	c.s.mu.Lock()
	c.s.releaseLocked(c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// Read starts ReadHeaderTimeout at the first byte (see above).
func (c *slotConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.begun.Load() {
		c.begun.Store(true)
		c.Conn.SetReadDeadline(c.within(time.Now().Add(c.s.header)))
	}
	return n, err
}

// within keeps a reserved slot's deadlines within its end.
func (c *slotConn) within(t time.Time) time.Time {
	if c.reservedSlot() && (t.IsZero() || t.After(c.end)) {
		return c.end
	}
	return t
}

// SetReadDeadline keeps the wait for the first byte set at admission: the server sets
// ReadHeaderTimeout before it (http.Server, conn.serve), and Read sets it when that byte comes.
func (c *slotConn) SetReadDeadline(t time.Time) error {
	if !c.begun.Load() {
		return nil
	}
	return c.Conn.SetReadDeadline(c.within(t))
}

func (c *slotConn) SetDeadline(t time.Time) error {
	if !c.begun.Load() {
		return c.SetWriteDeadline(t)
	}
	return c.Conn.SetDeadline(c.within(t))
}

func (c *slotConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.within(t)) }

// peerIP is a connection's remote address (nil when it has none).
func peerIP(c net.Conn) net.IP {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP
	}
	return nil
}

type reservedKey struct{}

// connContext marks the requests of a connection on a reserved slot (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*slotConn); ok && sc.reservedSlot() {
		return context.WithValue(ctx, reservedKey{}, true)
	}
	return ctx
}

// healthOnlyOnReservedSlots answers a request that came on a reserved slot 503 `unavailable`
// unless it asks /healthz or /readyz: those slots are kept for health checks.
func healthOnlyOnReservedSlots(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		reserved, _ := c.Request().Context().Value(reservedKey{}).(bool)
		if p := c.Request().URL.Path; reserved && p != "/healthz" && p != "/readyz" {
			return &api.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
				Message: "the server holds as many connections as it may; try again shortly"}
		}
		return next(c)
	}
}
