package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/owed/owed/owedtest/wait"
)

// granted reports whether done closes within a short real-time wait (the goroutines
// under test run in real time).
func granted(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

func acquireAsync(g *Gate, p Priority, n int, order *[]string, mu *sync.Mutex, name string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		if err := g.Acquire(context.Background(), p, n); err == nil {
			mu.Lock()
			*order = append(*order, name)
			mu.Unlock()
		}
		close(done)
	}()
	return done
}

// Waiters are served by priority (inline, author, sweep), in arrival order within one, and
// only the first is served even when a later one would fit: a score waiting for three slots
// is not overtaken by screens.
func TestGateServesByPriorityThenArrival(t *testing.T) {
	t.Parallel()
	g := NewGate(3)
	if err := g.Acquire(context.Background(), PrioritySweep, 3); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	sweep := acquireAsync(g, PrioritySweep, 1, &order, &mu, "sweep")
	waitQueued(t, g, 1)
	score := acquireAsync(g, PriorityAuthor, 3, &order, &mu, "author-score")
	waitQueued(t, g, 2)
	inline := acquireAsync(g, PriorityInline, 1, &order, &mu, "inline")
	waitQueued(t, g, 3)

	g.Release(1) // one free: the inline write goes first
	if !granted(inline) {
		t.Fatal("the inline waiter was not served first")
	}
	g.Release(1) // two free: the author's score (3) is first in line; the sweep's screen waits behind it
	if granted(sweep) {
		t.Fatal("the sweep overtook the author's score waiting for three slots")
	}
	g.Release(1) // two free
	if granted(sweep) {
		t.Fatal("the sweep overtook the author's score waiting for three slots")
	}
	g.Release(1) // the inline write's slot back: three free
	if !granted(score) {
		t.Fatal("the author's score was not served with three slots free")
	}
	g.Release(3)
	if !granted(sweep) {
		t.Fatal("the sweep was never served")
	}
	if got := [3]string{order[0], order[1], order[2]}; got != [3]string{"inline", "author-score", "sweep"} {
		t.Errorf("served %v", order)
	}
	if g.InUse() != 1 {
		t.Errorf("in use %d, want the sweep's 1", g.InUse())
	}
}

func waitQueued(t *testing.T, g *Gate, n int) {
	t.Helper()
	wait.Within(t, 5*time.Second, fmt.Sprintf("%d waiters", n), func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		q := 0
		for _, w := range g.waiters {
			q += len(w)
		}
		return q == n
	})
}

// A waiter whose context ends holds nothing and lets those behind it through.
func TestGateCancelledWaiterHoldsNothing(t *testing.T) {
	t.Parallel()
	g := NewGate(2)
	g.Acquire(context.Background(), PrioritySweep, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.Acquire(ctx, PriorityInline, 2) }()
	waitQueued(t, g, 1)
	var mu sync.Mutex
	var order []string
	behind := acquireAsync(g, PrioritySweep, 1, &order, &mu, "behind")
	waitQueued(t, g, 2)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled acquire succeeded")
	}
	if !granted(behind) {
		t.Fatal("the waiter behind a cancelled one was not served")
	}
	if g.InUse() != 2 {
		t.Errorf("in use %d, want 2", g.InUse())
	}
}

// AcquireUpTo takes what is free, at least one slot.
func TestGateAcquireUpTo(t *testing.T) {
	t.Parallel()
	g := NewGate(5)
	g.Acquire(context.Background(), PriorityInline, 2)
	if n, err := g.AcquireUpTo(context.Background(), PrioritySweep, 64); err != nil || n != 3 {
		t.Fatalf("AcquireUpTo = %d, %v; want the 3 free", n, err)
	}
	// Nothing free: it waits, until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if n, err := g.AcquireUpTo(ctx, PrioritySweep, 4); err == nil || n != 0 || g.InUse() != 5 {
		t.Fatalf("AcquireUpTo with none free = %d, %v (in use %d)", n, err, g.InUse())
	}
}

// Under many concurrent holders of mixed weights, the slots in use never pass the cap and all
// are given back.
func TestGateNeverOverCap(t *testing.T) {
	t.Parallel()
	const size = 7
	g := NewGate(size)
	var inUse, peak atomic.Int64
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			n := 1 + 2*(i%2) // screens and scores
			p := Priority(i % 3)
			if err := g.Acquire(context.Background(), p, n); err != nil {
				t.Error(err)
				return
			}
			now := inUse.Add(int64(n))
			for m := peak.Load(); now > m && !peak.CompareAndSwap(m, now); m = peak.Load() {
			}
			time.Sleep(50 * time.Microsecond)
			inUse.Add(-int64(n))
			g.Release(n)
		})
	}
	wg.Wait()
	if peak.Load() > size || peak.Load() < 3 {
		t.Errorf("peak %d slots in use with a gate of %d", peak.Load(), size)
	}
	if g.InUse() != 0 {
		t.Errorf("%d slots still in use", g.InUse())
	}
}

// A lease of slots gives them back once however many times it is released (a run releases
// after its call and again when it returns), and take carves a job's count out of a claim's
// slots only when they cover it.
func TestSlotsReleaseOnce(t *testing.T) {
	t.Parallel()
	g := NewGate(4)
	if err := g.Acquire(context.Background(), PrioritySweep, 4); err != nil {
		t.Fatal(err)
	}
	room := g.hold(4)
	score, ok := room.take(3)
	if !ok {
		t.Fatal("3 of 4 slots not taken")
	}
	if _, ok := room.take(3); ok {
		t.Fatal("3 slots taken out of the 1 left")
	}
	screen, ok := room.take(1)
	if !ok {
		t.Fatal("the last slot not taken")
	}
	score.release()
	score.release()
	room.release() // empty: nothing to give back
	if g.InUse() != 1 {
		t.Fatalf("in use %d after the score's double release, want the screen's 1", g.InUse())
	}
	screen.release()
	screen.release()
	var none *slots
	none.release()
	if g.InUse() != 0 {
		t.Fatalf("in use %d, want 0", g.InUse())
	}
}
