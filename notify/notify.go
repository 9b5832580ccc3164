// Package notify tells waiters the moment an author's own view (GET /api/listeners/mine)
// may have changed.
//
// A Hub keeps, per author, one channel that is closed at the author's next change (and links
// to the one of the change after it); waiters watch it and re-read the view's version (models.MineVersion) only when it closes, so a
// waiter costs no database work while nothing changes. Changes come from two places:
//
//   - in-process: the store calls Changed after each commit that changes an author's view
//     (Local mode, SQLite: one process holds every writer);
//   - PostgreSQL: triggers on the tables the view reads call pg_notify('owed_mine',
//     '<schema>:<author>') (migration 0011), and the Hub LISTENs on a dedicated connection, so
//     a change made by any replica, or by raw SQL, wakes the waiters of every replica. A
//     replica that loses that connection wakes all its waiters at once, at each try to
//     reconnect (with backoff, at most 5 s apart), and once more when it listens again, since
//     it may have missed notifications meanwhile. Users' token rotations and disables, and the
//     end of sessions, notify too (migration 0014): waiters check their credential at each wake.
//
// A wake is a hint, never a promise of change: a waiter re-reads the version and waits again
// if it is the same.
//
// Mark orders wakes and reads, so that waiters woken by one change can share a read.
package notify

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Channel is the PostgreSQL notification channel; payloads are "<schema>:<author id>", or
// "<schema>:*" for a change of every author's view.
const Channel = "owed_mine"

// Hub is the notifier. The zero value is not usable; call New.
type Hub struct {
	url string // PostgreSQL URL to LISTEN on; "" for in-process only
	log *slog.Logger

	mu      sync.Mutex
	waits   map[int64]*signal // per author, the signal of their next change
	refs    map[int64]int     // per author, open watches
	schema  string            // the schema whose notifications count (the listening connection's)
	stop    context.CancelFunc
	done    chan struct{}
	wakeAll int         // how many times every waiter was woken (reconnects), for tests and metrics
	watches int         // open watches
	beat    *beat       // the heartbeat (SetHeartbeat), nil without
	up      atomic.Bool // whether the LISTEN connection is up
}

// signal is one change of an author: c closes at it, and next is the change after it.
type signal struct {
	c    chan struct{}
	at   int64   // the Mark when c was closed
	next *signal // set before c is closed
}

// seq orders wakes and reads: see Mark.
var seq atomic.Int64

// Mark is a point in the order of wakes and reads: a read that starts after Mark returned
// sees every change whose wake (Watch.At) came before it. Waiters woken by one change share a
// read that started after the wake (api's coalescer).
func Mark() int64 { return seq.Add(1) }

// At is the Mark of the wake that closed C (0 while it is open).
func (w *Watch) At() int64 {
	select {
	case <-w.s.c:
		return w.s.at
	default:
		return 0
	}
}

// fire closes s, marking when.
func (s *signal) fire() {
	s.at = seq.Add(1)
	close(s.c)
}

// New makes a Hub. With a PostgreSQL URL (a postgres:// URL or a key/value string) it LISTENs
// there once started, on a session of its own (never through a pooler in transaction mode,
// which would hand the LISTEN a server connection it then gives to others); with "" it hears
// only Changed.
func New(listenURL string, log *slog.Logger) *Hub {
	return &Hub{url: listenURL, log: cmp.Or(log, slog.Default()), waits: map[int64]*signal{}, refs: map[int64]int{}}
}

// Listens reports whether the Hub hears changes from PostgreSQL (so in-process calls to
// Changed are redundant).
func (h *Hub) Listens() bool { return h.url != "" }

// Watch is one waiter's interest in an author's next change.
type Watch struct {
	h      *Hub
	userID int64
	s      *signal
	closed bool
}

// Watch starts watching userID: C closes at the author's next change after this call. Take
// the watch before reading the version it guards, so no change falls between the two.
func (h *Hub) Watch(userID int64) *Watch {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.waits[userID]
	if s == nil {
		s = &signal{c: make(chan struct{})}
		h.waits[userID] = s
	}
	h.refs[userID]++
	h.watches++
	return &Watch{h: h, userID: userID, s: s}
}

// C is closed at the author's next change (or when every waiter is woken).
func (w *Watch) C() <-chan struct{} { return w.s.c }

// Close ends the watch. Safe to call more than once.
func (w *Watch) Close() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	h.watches--
	if h.refs[w.userID]--; h.refs[w.userID] <= 0 {
		delete(h.refs, w.userID)
		delete(h.waits, w.userID)
	}
}

// Renew closes w and returns a new watch of the same author, from now: for a waiter that was
// woken and reads the version again after Renew.
func (w *Watch) Renew() *Watch {
	w.Close()
	return w.h.Watch(w.userID)
}

// Next closes w and returns a watch of the same author's first change after the one that
// woke w (or, if w has not fired, of the same change as w). A change that came after w's wake
// and before Next is not missed: the new watch is already closed. So a woken waiter may share
// a read that other waiters of the same wake began before it called Next (api's coalescer).
func (w *Watch) Next() *Watch {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.closed {
		panic("notify: Next of a closed watch")
	}
	w.closed = true
	s := w.s
	select {
	case <-s.c:
		s = s.next
	default:
	}
	return &Watch{h: h, userID: w.userID, s: s}
}

// fireLocked wakes the current waiters of id and puts the next change's signal in place, so
// that a woken waiter's Renew finds it.
func (h *Hub) fireLocked(id int64, s *signal) {
	ns := &signal{c: make(chan struct{})}
	s.next = ns
	h.waits[id] = ns
	s.fire()
}

// Changed wakes the waiters of each author. It costs a map lookup per author when nobody waits.
func (h *Hub) Changed(userIDs ...int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range userIDs {
		if s := h.waits[id]; s != nil {
			h.fireLocked(id, s)
		}
	}
}

// WakeAll wakes every waiter: after a change whose authors are not known (a bulk retry), or
// when notifications may have been missed.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, s := range h.waits {
		h.fireLocked(id, s)
	}
	h.wakeAll++
}

// Waiting is how many authors have a waiter.
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.refs)
}

// Watchers is how many watches are open: the long polls and streams waiting in this process.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches
}

// WokenAll is how many times every waiter was woken at once (reconnects, bulk changes).
func (h *Hub) WokenAll() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wakeAll
}

// Start begins listening on PostgreSQL (nothing to do in-process). The first LISTEN is made
// before Start returns, so a replica that serves after Start hears every later change; an
// error there is returned. Later losses of the connection are retried with backoff until Stop.
func (h *Hub) Start(ctx context.Context) error {
	if h.url == "" {
		return nil
	}
	conn, err := h.listen(ctx)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.mu.Lock()
	h.stop, h.done = cancel, make(chan struct{})
	h.mu.Unlock()
	h.up.Store(true)
	go h.run(lctx, conn)
	return nil
}

// Stop ends listening and waits for it to end; every waiter is woken so none is left behind.
func (h *Hub) Stop() {
	h.mu.Lock()
	stop, done := h.stop, h.done
	h.stop = nil
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	h.up.Store(false)
	h.WakeAll()
}

// listen opens the dedicated connection and LISTENs on Channel.
func (h *Hub) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(h.url)
	if err != nil {
		return nil, fmt.Errorf("notify: parse database URL: %w", err)
	}
	if !strings.Contains(h.url, "default_query_exec_mode") {
		// Nothing prepared on the server: a listen URL that goes through a pooler in
		// transaction mode by mistake still connects, and the heartbeat says what is wrong.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if cfg.RuntimeParams["application_name"] == "" {
		// The URL's own name, when it gives one, names this connection too, so an operator
		// (or a failover test) finds all of a replica's connections by it.
		cfg.RuntimeParams["application_name"] = "owed-notify"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("notify: connect: %w", err)
	}
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("notify: read schema: %w", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+Channel); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("notify: listen: %w", err)
	}
	h.mu.Lock()
	h.schema = schema
	h.mu.Unlock()
	return conn, nil
}

// Backoff bounds of reconnecting after the LISTEN connection is lost.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

func (h *Hub) run(ctx context.Context, conn *pgx.Conn) {
	defer close(h.done)
	if h.beat != nil {
		beating := make(chan struct{})
		go func() { defer close(beating); h.beats(ctx) }()
		defer func() { <-beating }()
	}
	for {
		err := h.receive(ctx, conn)
		h.up.Store(false)
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("notify: lost the LISTEN connection; reconnecting", "err", err)
		// While it is down no change is heard: every waiter looks now, and again at each try
		// to reconnect (at most maxBackoff apart), so none waits without a path to its next
		// change; a waiter whose reads fail too ends (an error event, a 503) and its client
		// comes back.
		h.WakeAll()
		backoff := minBackoff
		for {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if conn, err = h.listen(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("notify: reconnect", "err", err, "retryIn", backoff)
			h.WakeAll()
			backoff = min(2*backoff, maxBackoff)
		}
		// Whatever changed while the connection was down was not heard: every waiter looks.
		h.log.Info("notify: listening again")
		h.WakeAll()
		h.beatAgain()
		h.up.Store(true)
	}
}

// receive hands each notification to Changed until the connection fails or ctx ends.
func (h *Hub) receive(ctx context.Context, conn *pgx.Conn) error {
	h.mu.Lock()
	prefix := h.schema + ":"
	h.mu.Unlock()
	handle := func(n *pgconn.Notification) {
		rest, ok := strings.CutPrefix(n.Payload, prefix)
		if !ok || h.heardBeat(rest) {
			return // another schema's owed, in the same database; or a heartbeat
		}
		if rest == "*" { // every author's view (a hold: migration 0010)
			h.WakeAll()
		} else if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
			h.Changed(id)
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if n != nil {
			handle(n)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}
