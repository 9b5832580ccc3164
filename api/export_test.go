package api

// StreamsOpen is how many streams and held long polls this process holds.
func (a *API) StreamsOpen() int {
	cp := &a.live.caps
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.total
}
