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
