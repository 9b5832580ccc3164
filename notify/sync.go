package notify

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a cache of versions needs of the Hub (issue 25): a mark that tells whether an author
// changed since it was taken, without counting as a waiter, and on PostgreSQL a barrier (Sync)
// after which every notification committed before it has been heard.

// VersionMark is an author's state of change when it was taken: Changed reports whether the author's
// view changed since (or every waiter was woken: a reconnect, a hold). Unlike a Watch it is not
// counted among the waiters. Release it when done.
type VersionMark struct {
	h      *Hub
	userID int64
	s      *signal
}

// MarkVersion takes a mark of userID. Take it before reading the version it guards.
func (h *Hub) MarkVersion(userID int64) VersionMark {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.waits[userID]
	if s == nil {
		s = &signal{c: make(chan struct{})}
		h.waits[userID] = s
	}
	h.marks[userID]++
	return VersionMark{h: h, userID: userID, s: s}
}

// Changed reports whether the author changed since the mark was taken.
func (m VersionMark) Changed() bool {
	select {
	case <-m.s.c:
		return true
	default:
		return false
	}
}

// Release lets the mark go; call it once.
func (m VersionMark) Release() {
	h := m.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.marks[m.userID]--; h.marks[m.userID] <= 0 {
		delete(h.marks, m.userID)
		if h.refs[m.userID] == 0 {
			delete(h.waits, m.userID)
		}
	}
}

// syncState is the barrier's: whether the LISTEN connection is up (and every waiter was woken
// since it came up), the requests for the next round trip, and how to interrupt the wait for
// notifications to make it.
type syncState struct {
	mu        sync.Mutex
	up        bool
	interrupt context.CancelFunc
	waiting   []chan bool
}

// syncTimeout bounds the barrier's round trip; a connection that does not answer in time is
// taken as lost.
const syncTimeout = 2 * time.Second

// Sync returns true once every notification committed before the call has been handed to
// Changed: at once in-process (the store calls Changed at each commit), after one round trip
// on the LISTEN connection on PostgreSQL (notifications are sent before the answer; the round
// trip is shared by every Sync that arrives meanwhile). It returns false when it cannot tell:
// not listening, the connection down, or ctx done.
func (h *Hub) Sync(ctx context.Context) bool {
	if h.url == "" {
		return true
	}
	ch := make(chan bool, 1)
	st := &h.sync
	st.mu.Lock()
	if !st.up {
		st.mu.Unlock()
		return false
	}
	st.waiting = append(st.waiting, ch)
	if st.interrupt != nil {
		st.interrupt()
		st.interrupt = nil
	}
	st.mu.Unlock()
	select {
	case ok := <-ch:
		return ok
	case <-ctx.Done():
		return false
	}
}

// setUp records whether the connection is up; going down answers every waiting Sync false.
func (h *Hub) setUp(up bool) {
	st := &h.sync
	st.mu.Lock()
	defer st.mu.Unlock()
	st.up = up
	if !up {
		for _, ch := range st.waiting {
			ch <- false
		}
		st.waiting = nil
	}
}

// armWait returns the Syncs waiting for a round trip, or, when there are none, a context for
// the wait for notifications that the next Sync cancels.
func (h *Hub) armWait(ctx context.Context) (waiting []chan bool, wctx context.Context, cancel context.CancelFunc) {
	st := &h.sync
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.waiting) > 0 {
		waiting, st.waiting = st.waiting, nil
		return waiting, nil, nil
	}
	wctx, cancel = context.WithCancel(ctx)
	st.interrupt = cancel
	return nil, wctx, cancel
}

// disarm forgets the wait's interrupt.
func (h *Hub) disarm() {
	st := &h.sync
	st.mu.Lock()
	st.interrupt = nil
	st.mu.Unlock()
}

// barrier makes the round trip for waiting, hands every notification it brought to handle, and
// answers the Syncs.
func (h *Hub) barrier(ctx context.Context, conn *pgx.Conn, waiting []chan bool, handle func(*pgx.Conn) error) error {
	pctx, cancel := context.WithTimeout(ctx, syncTimeout)
	err := conn.Ping(pctx)
	cancel()
	if err == nil {
		err = handle(conn)
	}
	for _, ch := range waiting {
		ch <- err == nil
	}
	return err
}

// drained is a context that is already done: waiting for a notification with it returns only
// those already received.
var drained = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
