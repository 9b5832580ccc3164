package scheduler

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
