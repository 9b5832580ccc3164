package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
)

// Priority orders the claimers that wait for a model slot: a lower value is served first.
type Priority int

// The claimers, first served first: the write waiting for its own screen, then the author's
// view of their items, then the periodic sweep, and last the candidate's shadow calls.
const (
	PriorityInline Priority = iota
	PriorityAuthor
	PrioritySweep
	PriorityShadow
	priorities
)

// Gate caps the model calls in flight in one process: a weighted semaphore whose waiters are
// served by priority, then arrival; only the first waiter is served, so a score waiting for
// three slots is not starved by screens taking them one at a time.
type Gate struct {
	mu      sync.Mutex
	cap     int
	used    int
	waiters [priorities][]*waiter
}

type waiter struct {
	min, max int           // slots wanted: at least min, as many as free up to max
	got      int           // slots granted, set before ready is closed
	ready    chan struct{} // closed when granted
}

// NewGate makes a gate of n slots (at least 1).
func NewGate(n int) *Gate {
	return &Gate{cap: max(n, 1)}
}

// Cap is how many slots the gate has.
func (g *Gate) Cap() int { return g.cap }

// InUse is how many slots are held now.
func (g *Gate) InUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// Acquire waits for n slots at priority p (n is capped at the gate's size). It fails only when
// ctx ends first, holding nothing.
func (g *Gate) Acquire(ctx context.Context, p Priority, n int) error {
	n = min(max(n, 1), g.cap)
	_, err := g.acquire(ctx, p, n, n)
	return err
}

func (g *Gate) acquire(ctx context.Context, p Priority, least, most int) (int, error) {
	g.mu.Lock()
	if _, w := g.first(); w == nil && g.cap-g.used >= least {
		got := min(most, g.cap-g.used)
		g.used += got
		g.mu.Unlock()
		return got, nil
	}
	w := &waiter{min: least, max: most, ready: make(chan struct{})}
	g.waiters[p] = append(g.waiters[p], w)
	g.mu.Unlock()

	select {
	case <-w.ready:
		return w.got, nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready:
			// Granted as ctx ended: give the slots back.
			g.used -= w.got
		default:
			g.remove(p, w)
		}
		g.grant() // a waiter behind this one may fit now
		g.mu.Unlock()
		return 0, ctx.Err()
	}
}

// Release gives n slots back and serves the waiters they let through.
func (g *Gate) Release(n int) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	g.used -= n
	if g.used < 0 {
		g.mu.Unlock()
		panic("scheduler: Gate released more slots than were held")
	}
	g.grant()
	g.mu.Unlock()
}

// first is the waiter served next and its priority, or nil.
func (g *Gate) first() (Priority, *waiter) {
	for p, q := range g.waiters {
		if len(q) > 0 {
			return Priority(p), q[0]
		}
	}
	return 0, nil
}

// grant serves waiters in order while the first one fits.
func (g *Gate) grant() {
	for p, w := g.first(); w != nil && g.cap-g.used >= w.min; p, w = g.first() {
		w.got = min(w.max, g.cap-g.used)
		g.used += w.got
		g.waiters[p][0] = nil
		g.waiters[p] = g.waiters[p][1:]
		close(w.ready)
	}
}

func (g *Gate) remove(p Priority, w *waiter) {
	q := g.waiters[p]
	for i, x := range q {
		if x == w {
			g.waiters[p] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
}

// slots is model slots held from a Gate, taken before the job they are for is claimed; only
// the first release gives them back.
type slots struct {
	gate *Gate
	n    atomic.Int64
}

// hold makes a lease of n slots the caller already took from g.
func (g *Gate) hold(n int) *slots {
	s := &slots{gate: g}
	s.n.Store(int64(n))
	return s
}

// take moves n of the lease's slots into a lease of their own; ok is false, and nothing
// moves, when the lease holds fewer than n.
func (s *slots) take(n int) (*slots, bool) {
	for {
		have := s.n.Load()
		if have < int64(n) {
			return nil, false
		}
		if s.n.CompareAndSwap(have, have-int64(n)) {
			return s.gate.hold(n), true
		}
	}
}

// release gives the lease's slots back to the gate, the first time it is called.
func (s *slots) release() {
	if s == nil {
		return
	}
	if n := s.n.Swap(0); n > 0 {
		s.gate.Release(int(n))
	}
}
