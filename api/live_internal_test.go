package api

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/owed/owed/notify"
)

// TestCoalescerSharesOneRead: waiters woken by one change, asking at once for a read of one key
// that began after their wake, share one read; a waiter woken by a later change gets a read of
// its own, never the earlier one.
func TestCoalescerSharesOneRead(t *testing.T) {
	t.Parallel()
	co := coalescer{flights: map[string]*flight{}}
	var reads atomic.Int64
	release := make(chan struct{})
	read := func() (any, error) {
		<-release
		return reads.Add(1), nil
	}
	mark := notify.Mark()
	const n = 24
	var wg sync.WaitGroup
	got := make([]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = co.do("v|1", mark, read)
		}()
	}
	close(release)
	wg.Wait()
	// Waiters that came while the first read ran but after it started share it; any that came
	// before it started wait for it and then share the next: at most two reads in all.
	if r := reads.Load(); r < 1 || r > 2 {
		t.Fatalf("%d waiters of one change made %d reads, want one (two at most)", n, r)
	}
	for i := range got {
		if got[i] != got[0] && reads.Load() == 1 {
			t.Fatalf("waiter %d got %v, waiter 0 %v: one read, two answers", i, got[i], got[0])
		}
	}
	before := reads.Load()
	if v, _ := co.do("v|1", notify.Mark(), read); v.(int64) != before+1 {
		t.Fatalf("a waiter of a later change got read %v, want a new one (%d)", v, before+1)
	}
}
