package app

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestStagesStopInOrderUnderOneDeadline: a stage that uses up the deadline (HTTP draining)
// leaves the later stages no fresh grace: they run under the same deadline, already past; and
// the stoppers of one stage run at once (the runners: each waits here until all three have
// started, which stopping them one after another would never reach).
func TestStagesStopInOrderUnderOneDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var mu sync.Mutex
	var order []string
	note := func(name string, ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, name)
		if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
			t.Errorf("%s stopped with the deadline %v (%v); want the one deadline %v", name, d, ok, deadline)
		}
	}
	draining := func(ctx context.Context) error {
		<-ctx.Done() // a request that outlasts the deadline
		note("http", ctx)
		return nil
	}
	all := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(3)
	go func() { entered.Wait(); close(all) }()
	runner := func(ctx context.Context) error {
		if ctx.Err() == nil {
			t.Error("a runner's stop began with time left after HTTP used the whole deadline: it had a grace of its own")
		}
		entered.Done()
		select {
		case <-all:
		case <-time.After(time.Minute): // only a broken build waits this long
			t.Error("a runner never saw the others start stopping: they stop one after another")
		}
		note("runner", ctx)
		return nil
	}
	start := time.Now()
	if err := stopInStages(ctx, stage{"http", []stopper{draining}}, stage{"runners", []stopper{runner, runner, runner}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the stop took %v", took)
	}
	if len(order) != 4 || order[0] != "http" {
		t.Errorf("stopped in the order %v; want http, then the three runners", order)
	}
}
