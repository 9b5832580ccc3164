// Package wait is the tests' one way to wait for work that finishes on other goroutines or in
// other processes: poll a condition until it holds, on the wall clock, never for a fake clock's
// time (move the fake clock instead). It imports nothing of owed, so every package's tests,
// internal ones included, can use it.
package wait

import (
	"testing"
	"time"
)

// Until polls cond until it holds, failing t after 10 s.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, 10*time.Second, what, cond)
}

// Within polls cond until it holds, failing t after d; the polls start 1 ms apart and space out
// to 50 ms.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !For(d, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// For polls cond as Within does and reports whether it held within d, for a test that says
// more than Within's message when it did not.
func For(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return true
}
