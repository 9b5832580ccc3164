package metrics

import (
	"context"
	"sync"
	"time"
)

// CountsFresh is how long a scrape trusts the job counts an earlier scrape read: at most one
// full count of the job table per CountsFresh, however many scrapers (or replicas' scrapers)
// ask.
const CountsFresh = 15 * time.Second

// CacheCounts wraps count so that it runs at most once per fresh (CountsFresh when 0), timed
// by now: a scrape within fresh of the last count is answered from it, the oldest due job's
// age moved on by the time since. Concurrent scrapes of a stale cache wait for one count. A
// failed count is not kept. It is a small wrapper on purpose: counts kept as jobs change can
// replace count (or the wrapper) without the collector knowing.
func CacheCounts(count func(ctx context.Context) (JobCounts, error), fresh time.Duration, now func() time.Time) func(ctx context.Context) (JobCounts, error) {
	if fresh <= 0 {
		fresh = CountsFresh
	}
	var (
		mu   sync.Mutex
		last JobCounts
		at   time.Time
		ok   bool
	)
	return func(ctx context.Context) (JobCounts, error) {
		mu.Lock()
		defer mu.Unlock()
		t := now()
		if !ok || t.Sub(at) >= fresh || t.Before(at) {
			c, err := count(ctx)
			if err != nil {
				return c, err
			}
			last, at, ok = c, t, true
		}
		out := last
		if out.HasOldestDueAge {
			out.OldestDueAge += t.Sub(at)
		}
		return out, nil
	}
}
