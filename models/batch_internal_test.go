package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/owed/owed/owedtest/wait"
)

// recordingWriter is a batch write that keeps every batch it was given and can be held at the
// start of a batch, so a test can queue calls behind it.
type recordingWriter struct {
	mu      sync.Mutex
	batches [][]string
	hold    chan struct{} // when set, each write waits for a receive from it
	started chan struct{}
	fail    func([]string) bool
}

func (w *recordingWriter) write(_ context.Context, in []string) ([]string, error) {
	if w.started != nil {
		w.started <- struct{}{}
	}
	if w.hold != nil {
		<-w.hold
	}
	w.mu.Lock()
	w.batches = append(w.batches, slices.Clone(in))
	w.mu.Unlock()
	if w.fail != nil && w.fail(in) {
		return nil, errors.New("batch refused")
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = "done " + s
	}
	return out, nil
}

func newTestBatcher(w *recordingWriter, max int) *batcher[string, string, string] {
	return &batcher[string, string, string]{max: max, lanes: 1, write: w.write,
		key: func(s string) string { return s[:1] }} // calls with the same first letter never share a batch
}

// queueBehind starts calls while the first batch (of first) is held, waits until all are queued,
// then releases the writer and returns each call's outcome.
func queueBehind(t *testing.T, b *batcher[string, string, string], w *recordingWriter, first string, calls []string) map[string]error {
	t.Helper()
	results := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	do := func(in string) {
		out, err := b.do(context.Background(), in)
		if err == nil && out != "done "+in {
			t.Errorf("%s: outcome %q", in, out)
		}
		mu.Lock()
		results[in] = err
		mu.Unlock()
	}
	wg.Go(func() { do(first) })
	<-w.started
	for _, in := range calls {
		wg.Go(func() { do(in) })
	}
	queued(t, b, len(calls))
	go func() {
		for range w.started {
		}
	}()
	close(w.hold)
	wg.Wait()
	close(w.started)
	return results
}

// Calls that arrive while a batch is written share the next batch, except calls with a key
// already in it, which wait for the one after; each call gets its own outcome.
func TestBatcherGroupsWaitingCalls(t *testing.T) {
	t.Parallel()
	w := &recordingWriter{hold: make(chan struct{}), started: make(chan struct{})}
	b := newTestBatcher(w, 3)
	results := queueBehind(t, b, w, "a0", []string{"b1", "c1", "b2", "d1", "e1"})
	for in, err := range results {
		if err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	// The queued calls arrive in any order; whatever it is, the second batch is full (four
	// keys wait for three places), and b2 never shares b1's batch: three or four batches.
	if len(w.batches) < 3 || len(w.batches) > 4 || len(w.batches[1]) != 3 {
		t.Fatalf("batches %v, want the lone first call, a full batch of 3, then the rest", w.batches)
	}
	if w.batches[0][0] != "a0" || len(w.batches[0]) != 1 {
		t.Errorf("first batch %v, want the lone first call", w.batches[0])
	}
	var queued []string
	for _, batch := range w.batches[1:] {
		if len(batch) > 3 {
			t.Errorf("batch %v is over the cap of 3", batch)
		}
		keys := map[byte]bool{}
		for _, in := range batch {
			if keys[in[0]] {
				t.Errorf("batch %v has two calls of key %c", batch, in[0])
			}
			keys[in[0]] = true
		}
		queued = append(queued, batch...)
	}
	slices.Sort(queued)
	if !slices.Equal(queued, []string{"b1", "b2", "c1", "d1", "e1"}) {
		t.Errorf("written %v, want each queued call once", queued)
	}
}

// A batch that fails as a whole is written again call by call, so only the bad call fails.
func TestBatcherFailedBatchRetriesEachAlone(t *testing.T) {
	t.Parallel()
	w := &recordingWriter{hold: make(chan struct{}), started: make(chan struct{}),
		fail: func(in []string) bool { return slices.Contains(in, "x-bad") }}
	b := newTestBatcher(w, 10)
	results := queueBehind(t, b, w, "a0", []string{"b1", "x-bad", "c1"})
	for _, in := range []string{"a0", "b1", "c1"} {
		if results[in] != nil {
			t.Errorf("%s: %v, want written", in, results[in])
		}
	}
	if results["x-bad"] == nil {
		t.Error("the bad call succeeded")
	}
	// a0 alone; the batch of three (refused); then each of the three alone.
	if len(w.batches) != 5 {
		t.Errorf("batches %v, want 5", w.batches)
	}

	// A lone call that fails is its own retry: it is written once.
	lone := &recordingWriter{fail: func([]string) bool { return true }}
	if _, err := newTestBatcher(lone, 10).do(context.Background(), "z"); err == nil || len(lone.batches) != 1 {
		t.Errorf("a lone failing call: %v after batches %v, want its error after one", err, lone.batches)
	}
}

// Calls one after another, each after the queue drained: every one is written (a drain that
// ends gives its lane back).
func TestBatcherServesCallsAfterItDrained(t *testing.T) {
	t.Parallel()
	seq := &recordingWriter{}
	sb := newTestBatcher(seq, 10)
	for _, in := range []string{"p", "q", "r"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := sb.do(ctx, in)
		cancel()
		if err != nil || out != "done "+in {
			t.Fatalf("call %s after the queue drained: %q, %v", in, out, err)
		}
		wait.Until(t, "the drain to end", func() bool { sb.mu.Lock(); defer sb.mu.Unlock(); return sb.running == 0 })
	}
}

// A call whose context ends while it waits in the queue is never written.
func TestBatcherDropsCallsCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	w := &recordingWriter{hold: make(chan struct{}), started: make(chan struct{})}
	b := newTestBatcher(w, 10)
	done := make(chan error, 1)
	go func() { _, err := b.do(context.Background(), "a0"); done <- err }()
	<-w.started
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { _, err := b.do(ctx, "b1"); cancelled <- err }()
	queued(t, b, 1)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v, want context.Canceled", err)
	}
	go func() {
		for range w.started {
		}
	}()
	close(w.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, batch := range w.batches {
		if slices.Contains(batch, "b1") {
			t.Errorf("the cancelled call was written: %v", w.batches)
		}
	}
}

// queued waits until n calls are queued behind the batch under way.
func queued(t *testing.T, b *batcher[string, string, string], n int) {
	t.Helper()
	wait.Until(t, fmt.Sprintf("%d calls queued", n), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == n
	})
}
