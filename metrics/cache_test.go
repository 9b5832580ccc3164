package metrics_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/metrics"
)

// TestCacheCountsCountsOncePerPeriod: many scrapes within 15 s make one full count; the next
// after 15 s counts again; a failure is not kept; the oldest due age moves with the clock.
func TestCacheCountsCountsOncePerPeriod(t *testing.T) {
	var calls atomic.Int64
	var fail atomic.Bool
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	count := metrics.CacheCounts(func(context.Context) (metrics.JobCounts, error) {
		n := calls.Add(1)
		if fail.Load() {
			return metrics.JobCounts{}, errors.New("database gone")
		}
		return metrics.JobCounts{ByTaskWhy: map[[2]string]int64{{"screen", "none"}: n}, OldestDueAge: time.Minute, HasOldestDueAge: true}, nil
	}, 0, clock)

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := count(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("50 scrapes at once made %d counts, want 1", n)
	}
	advance(14 * time.Second)
	c, _ := count(t.Context())
	if n := calls.Load(); n != 1 || c.OldestDueAge != time.Minute+14*time.Second {
		t.Fatalf("14 s later: %d counts, oldest due %v; want 1 and 1m14s", n, c.OldestDueAge)
	}
	advance(time.Second)
	c, _ = count(t.Context())
	if n := calls.Load(); n != 2 || c.ByTaskWhy[[2]string{"screen", "none"}] != 2 {
		t.Fatalf("15 s later: %d counts, want 2", n)
	}
	fail.Store(true)
	advance(metrics.CountsFresh)
	if _, err := count(t.Context()); err == nil {
		t.Fatal("a failed count was answered from the cache")
	}
	fail.Store(false)
	if _, err := count(t.Context()); err != nil || calls.Load() != 4 {
		t.Fatalf("after a failure: %v, %d counts; want a new count", err, calls.Load())
	}
}
