package scheduler

import (
	"context"

	"github.com/owed/owed/models"
)

// Run runs one job the test claimed as a sweep runs what it claimed (run): its task's model
// slots taken first, at the sweep's priority.
func (c *Content) Run(ctx context.Context, job models.Job) (Outcome, error) {
	var s *slots
	if n := callsOf(job.Task); n > 0 {
		if err := c.gate.Acquire(ctx, PrioritySweep, n); err != nil {
			return Pending, err
		}
		s = c.gate.hold(n)
	}
	out, _, err := c.run(ctx, leased{job: job, slots: s})
	return out, err
}

// AuthorSweepsUnderWay is how many author sweeps (SweepAuthor) are running now: one that is no
// longer counted has made its last claim and logged its ending.
func (c *Content) AuthorSweepsUnderWay() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.authors)
}

// AcquireUpTo waits until at least one slot is free for priority p and takes as many as are
// free, up to most; it says how many it took.
func (g *Gate) AcquireUpTo(ctx context.Context, p Priority, most int) (int, error) {
	return g.acquire(ctx, p, 1, max(most, 1))
}

// ModelWaiters is how many jobs wait for model slots in c's gate (tests only).
func (c *Content) ModelWaiters() int {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	n := 0
	for _, ws := range c.gate.waiters {
		n += len(ws)
	}
	return n
}

// TakeSweepWake reports whether the sweep has a wake waiting (Wake was called since the loop
// last took one), and takes it (tests only: on a Content that is not started, where nothing
// else takes it).
func (c *Content) TakeSweepWake() bool { return c.sweep.takeWake() }

// WatchWake reports, each time the returned func is called, whether the queue has been woken
// since WatchWake (tests only).
func (b *Backfill) WatchWake() func() bool {
	next := b.wakeChan()
	return func() bool { return isClosed(next) }
}

// TakeQueueKick reports whether the queue loop has a kick waiting (Kick was called since the
// loop last took one), and takes it (tests only: on a Backfill that is not started).
func (b *Backfill) TakeQueueKick() bool { return b.queue.takeWake() }

// takeWake takes the loop's waiting wake, if any.
func (l *loop) takeWake() bool {
	select {
	case <-l.wake:
		return true
	default:
		return false
	}
}

// Reserve takes n model slots as a claimer does before it knows whether it finds jobs for
// them, and answers the function that gives them back.
func (c *Content) Reserve(ctx context.Context, n int) (func(), error) {
	if err := c.gate.Acquire(ctx, PrioritySweep, n); err != nil {
		return nil, err
	}
	return c.gate.hold(n).release, nil
}
