package models

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// batcher runs concurrent calls of one write together (group commit): calls arriving during a
// batch wait for the next; each keeps its own outcome.
type batcher[In any, Out any, K comparable] struct {
	max   int        // calls in one batch
	lanes int        // batches written at once (batchLanes)
	key   func(In) K // calls with equal keys never share a batch; nil: any calls may
	write func(context.Context, []In) ([]Out, error)

	mu      sync.Mutex
	queue   []*batchCall[In, Out]
	running int
}

type batchCall[In any, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

// batchTimeout bounds one batch's write, which outlives its callers' contexts.
const batchTimeout = time.Minute

// do queues in and waits for its outcome. A call whose ctx ends before its batch is taken is
// dropped, unwritten, with ctx's error; once taken it is written and do waits for it.
func (b *batcher[In, Out, K]) do(ctx context.Context, in In) (Out, error) {
	c := &batchCall[In, Out]{in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.running < b.lanes {
		b.running++
		go b.drain()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(b.queue, c); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		b.mu.Unlock()
		var zero Out
		return zero, ctx.Err()
	}
	b.mu.Unlock()
	<-c.done
	return c.out, c.err
}

// drain writes batches until the queue is empty.
func (b *batcher[In, Out, K]) drain() {
	for {
		b.mu.Lock()
		batch := b.take()
		if len(batch) == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.run(batch)
	}
}

// take removes the next batch from the queue, oldest first, one call per key. The caller holds mu.
func (b *batcher[In, Out, K]) take() []*batchCall[In, Out] {
	var batch []*batchCall[In, Out]
	rest := b.queue[:0]
	keys := make(map[K]bool, min(len(b.queue), b.max))
	for _, c := range b.queue {
		if len(batch) == b.max {
			rest = append(rest, c)
			continue
		}
		if b.key != nil {
			k := b.key(c.in)
			if keys[k] {
				rest = append(rest, c)
				continue
			}
			keys[k] = true
		}
		batch = append(batch, c)
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}

// run writes one batch and hands each call its outcome. When the batch fails as a whole (and so
// wrote nothing), each call is written alone, so one bad call cannot fail the others.
func (b *batcher[In, Out, K]) run(batch []*batchCall[In, Out]) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	outs, err := b.write(ctx, ins)
	if err != nil && len(batch) > 1 {
		for _, c := range batch {
			outs, err := b.write(ctx, []In{c.in})
			if err == nil {
				c.out = outs[0]
			}
			c.err = err
			close(c.done)
		}
		return
	}
	for i, c := range batch {
		if err == nil {
			c.out = outs[i]
		}
		c.err = err
		close(c.done)
	}
}

// jsonParam is rows encoded for fromJSON.
func jsonParam(rows any) (string, error) {
	b, err := json.Marshal(rows)
	return string(b), err
}

// idList is ids encoded for idIn: a JSON array, which no list of integers fails to be.
func idList(ids []int64) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

// batchLanes is how many batches of one kind are written at once (one: cheapest per call).
const batchLanes = 1

// maxBatch caps the calls in one batch (and so the placeholders in one statement).
const maxBatch = 128
