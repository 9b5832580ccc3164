package api

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
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

// TestMineCacheKeepsAnswersWithinItsBound: an answer comes back byte for byte under its tag;
// past the bound the least recently used go first, and the kept bytes never exceed it.
func TestMineCacheKeepsAnswersWithinItsBound(t *testing.T) {
	t.Parallel()
	c := newMineCache(256 << 10)
	// Answers that do not pack (random text), so the bound is reached as with real views.
	body := func(i int) []byte {
		b := make([]byte, 4000)
		_, _ = rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)}).Read(b)
		return []byte(fmt.Sprintf(`{"items":[{"kind":"pitch","id":%d,"title":%q}]}`, i, hex.EncodeToString(b)))
	}
	if _, ok := c.get(`"a"`); ok {
		t.Fatal("an empty cache answered")
	}
	c.put(`"0"`, body(0))
	if got, ok := c.get(`"0"`); !ok || !bytes.Equal(got, body(0)) {
		t.Fatalf("get after put: %v, %d bytes", ok, len(got))
	}
	for i := 1; i < 2000; i++ {
		c.put(fmt.Sprintf(`"%d"`, i), body(i))
		c.get(`"0"`) // kept in use: never the least recently used
		if c.size > c.max {
			t.Fatalf("after %d answers: %d bytes kept, bound %d", i+1, c.size, c.max)
		}
	}
	if _, ok := c.get(`"1"`); ok {
		t.Error("the least recently used answer was kept past the bound")
	}
	if got, ok := c.get(`"0"`); !ok || !bytes.Equal(got, body(0)) {
		t.Error("an answer in use was dropped")
	}
	if got, ok := c.get(`"1999"`); !ok || !bytes.Equal(got, body(1999)) {
		t.Error("the newest answer is not kept")
	}
	if n := c.len(); n < 10 || n >= 2000 {
		t.Errorf("%d answers kept", n)
	}
}
