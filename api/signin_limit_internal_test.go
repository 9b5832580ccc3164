package api

import (
	"fmt"
	"testing"
	"time"
)

// TestSignInLimiterKeysAreBounded: a caller cycling through endless addresses or tokens does
// not grow the limiter past its size; a key it forgot was idle the longest.
func TestSignInLimiterKeysAreBounded(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	k := newKeyedLimiter(time.Minute, 2, 100)
	for i := range 10_000 {
		k.take(fmt.Sprintf("198.51.100.%d", i), now)
	}
	if n := k.len(); n != 100 {
		t.Errorf("%d keys held after 10000 distinct ones, want the bound 100", n)
	}
	// A key still held keeps its count: two takes, then refused until a token is back.
	k.take("a", now)
	k.take("a", now)
	if ok, wait := k.take("a", now); ok || wait != time.Minute {
		t.Errorf("third take at once: %v %v, want refused for a minute", ok, wait)
	}
	if ok, _ := k.take("a", now.Add(time.Minute)); !ok {
		t.Errorf("a take a minute later was refused")
	}
}
