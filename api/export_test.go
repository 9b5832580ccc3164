package api

// StreamsOpen is how many streams and held long polls this process holds.
func (a *API) StreamsOpen() int {
	cp := &a.live.caps
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.total
}

// LiveReads is how many shared re-reads of authors' views waiters have made.
func (a *API) LiveReads() int64 { return a.live.reads.Load() }
