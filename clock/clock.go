// Package clock lets time-based behaviour (leases, backoff, budgets, ETAs) be tested without
// sleeping: production code reads a Clock, tests hand it a Fake they move by hand.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock, in UTC.
type Real struct{}

// Now returns the current UTC time.
func (Real) Now() time.Time { return time.Now().UTC() }

// Fake is a clock that moves only when told to. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{} // closed and replaced when a timer is added (WaitTimers)
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

// Timers is a Clock that makes its own timers; a Fake's fire only when it is moved past them.
type Timers interface {
	NewTimer(d time.Duration) (c <-chan time.Time, stop func())
}

// NewTimer is a timer of c's time: c's own when it makes them (a Fake), a real one otherwise.
// stop releases it; the channel gets at most one value.
func NewTimer(c Clock, d time.Duration) (<-chan time.Time, func()) {
	if t, ok := c.(Timers); ok {
		return t.NewTimer(d)
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// NewTimer makes a timer that fires when the fake time reaches now+d (at once if d <= 0).
func (f *Fake) NewTimer(d time.Duration) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t.c, func() {}
	}
	f.timers = append(f.timers, t)
	if f.added != nil {
		close(f.added)
		f.added = nil
	}
	return t.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, o := range f.timers {
			if o == t {
				f.timers = append(f.timers[:i], f.timers[i+1:]...)
				break
			}
		}
	}
}

// Timers is how many timers wait for the fake time to move.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n timers wait (code under test is parked on them) or ctx ends.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return nil
		}
		if f.added == nil {
			f.added = make(chan struct{})
		}
		added := f.added
		f.mu.Unlock()
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fire sends on, and drops, every timer due at f.now; f.mu is held.
func (f *Fake) fire() {
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			t.c <- f.now
		} else {
			kept = append(kept, t)
		}
	}
	clear(f.timers[len(kept):])
	f.timers = kept
}

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Set moves the clock to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t.UTC()
	f.fire()
	f.mu.Unlock()
}

// Advance moves the clock forward by d and returns the new time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fire()
	return f.now
}

// Sleep waits d or until ctx ends, whichever is first; it returns ctx's error when ctx ended
// first. Runners take it as their default wait, and tests hand them one that moves a Fake.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
