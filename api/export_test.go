package api

// StreamsOpen is how many streams and held long polls this process holds.
func (a *API) StreamsOpen() int {
	cp := &a.live.caps
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.total
}

// len is how many answers are kept.
func (c *mineCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
