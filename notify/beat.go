package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A listener can be connected and hear nothing: LISTEN run through a pooler in transaction
// mode lands on a server connection that the pooler then lends to other clients, and no
// notification reaches the Hub again, with no error anywhere. The heartbeat finds it out: every
// period the Hub has a notification sent through the store's pool (the way the triggers'
// notifications are sent) and expects it on the LISTEN connection; one that has not arrived a
// period later makes the Hub deaf (Problem) until one arrives again.

// DefaultBeatEvery is the heartbeat's period.
const DefaultBeatEvery = 5 * time.Second

// beatTag marks a heartbeat's payload: "<schema>:beat:<hub>:<n>".
const beatTag = "beat:"

// beat is the heartbeat's state.
type beat struct {
	send  func(ctx context.Context, payload string) error
	every time.Duration
	id    string // this Hub's, so replicas on one schema ignore each other's beats

	mu     sync.Mutex
	sent   int64     // the last beat sent
	sentAt time.Time // when it was sent
	heard  int64     // the last beat heard
	deaf   string    // why the listener is taken as deaf, or ""
}

// SetHeartbeat makes the Hub, once started, send a heartbeat every period (0:
// DefaultBeatEvery) through send, which must run pg_notify(Channel, current_schema() || ':' ||
// payload) on the store's pool. Call it before Start.
func (h *Hub) SetHeartbeat(send func(ctx context.Context, payload string) error, every time.Duration) {
	if every <= 0 {
		every = DefaultBeatEvery
	}
	b := make([]byte, 6)
	rand.Read(b)
	h.beat = &beat{send: send, every: every, id: hex.EncodeToString(b)}
}

// Problem says why the listener is taken to hear nothing (a heartbeat sent through the
// store's pool did not arrive), or "" while it hears.
func (h *Hub) Problem() string {
	if h.beat == nil {
		return ""
	}
	h.beat.mu.Lock()
	defer h.beat.mu.Unlock()
	return h.beat.deaf
}

// heardBeat takes a notification's payload (past the schema) that may be a heartbeat, and
// reports whether it was one.
func (h *Hub) heardBeat(rest string) bool {
	tail, ok := strings.CutPrefix(rest, beatTag)
	if !ok {
		return false
	}
	b := h.beat
	if b == nil {
		return true
	}
	id, n, _ := strings.Cut(tail, ":")
	seq, err := strconv.ParseInt(n, 10, 64)
	if id != b.id || err != nil {
		return true
	}
	b.mu.Lock()
	b.heard = max(b.heard, seq)
	b.mu.Unlock()
	return true
}

// beatAgain forgets the beats sent while the connection was down (a new LISTEN could not
// hear them), so a reconnect is judged by the beats sent after it.
func (h *Hub) beatAgain() {
	if b := h.beat; b != nil {
		b.mu.Lock()
		b.heard = b.sent
		b.mu.Unlock()
	}
}

// beats sends a heartbeat every period until ctx ends, judging the last one first.
func (h *Hub) beats(ctx context.Context) {
	b := h.beat
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		h.judge(time.Now())
		b.mu.Lock()
		next := b.sent + 1
		b.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, b.every)
		at := time.Now()
		err := b.send(sctx, beatTag+b.id+":"+strconv.FormatInt(next, 10))
		cancel()
		if err == nil {
			b.mu.Lock()
			b.sent, b.sentAt = next, at
			b.mu.Unlock()
		} else if ctx.Err() == nil {
			h.log.Debug("notify: heartbeat not sent", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// judge decides, at now, whether the listener hears: deaf when the last beat sent has not
// been heard by the next tick (half a period at least: a ticker may tick a little early)
// while the LISTEN connection is up (a lost connection
// is the reconnect loop's to report). Becoming deaf wakes every waiter, so none waits on a
// change it cannot hear.
func (h *Hub) judge(now time.Time) {
	b := h.beat
	up := h.up.Load()
	b.mu.Lock()
	missed := up && b.sent > b.heard && now.Sub(b.sentAt) >= b.every/2
	was := b.deaf
	switch {
	case missed && was == "":
		b.deaf = "the LISTEN connection hears nothing: a heartbeat sent through the database pool did not arrive within " +
			b.every.String() + " (through a pooler in transaction mode, set OWED_DATABASE_LISTEN_URL to a direct connection)"
	case !missed && b.heard >= b.sent && was != "":
		b.deaf = ""
	}
	now2 := b.deaf
	b.mu.Unlock()
	switch {
	case was == "" && now2 != "":
		h.log.Error("notify: " + now2)
		h.WakeAll()
	case was != "" && now2 == "":
		h.log.Info("notify: the LISTEN connection hears the heartbeat again")
	}
}
