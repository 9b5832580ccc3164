package app

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestStagesStopInOrderEachWithTheFullGrace: a stage that uses up its grace (HTTP draining)
// leaves the next stage's stoppers the whole grace each, and the stoppers of one stage run at
// once (the runners: each waits here until all three have started, which stopping them one
// after another would never reach).
func TestStagesStopInOrderEachWithTheFullGrace(t *testing.T) {
	const grace = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var mu sync.Mutex
	var order []string
	var drainedAt time.Time
	draining := func(ctx context.Context) error {
		<-ctx.Done() // a request that outlasts the grace
		mu.Lock()
		order, drainedAt = append(order, "http"), time.Now()
		mu.Unlock()
		return nil
	}
	all := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(3)
	go func() { entered.Wait(); close(all) }()
	deadlines := make(chan time.Time, 3)
	runner := func(ctx context.Context) error {
		entered.Done()
		select {
		case <-all:
		case <-ctx.Done():
			t.Error("a runner's grace ended before every runner had started stopping: they stop one after another")
		}
		d, ok := ctx.Deadline()
		if !ok {
			t.Error("a runner's stop has no deadline")
		}
		deadlines <- d
		mu.Lock()
		order = append(order, "runner")
		mu.Unlock()
		return nil
	}
	if err := stopInStages(ctx, []stopper{draining}, []stopper{runner, runner, runner}); err != nil {
		t.Fatal(err)
	}
	close(deadlines)
	for d := range deadlines {
		// The grace is what is left on ctx when the stop begins, a hair under 200 ms; a stage
		// given what HTTP left over would have nothing.
		if left := d.Sub(drainedAt); left < grace/2 {
			t.Errorf("a runner's stop had %s after HTTP drained; want the full grace (about %s)", left, grace)
		}
	}
	if len(order) != 4 || order[0] != "http" {
		t.Errorf("stopped in the order %v; want http, then the three runners", order)
	}
}
