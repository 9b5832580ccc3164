// Package clocktest has clocks for tests: a Fake moved by hand, and a Stepping clock whose
// waits end at once, moving the Fake by their length.
package clocktest

import (
	"context"
	"sync"
	"time"
)

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

// Stepping is a Fake whose timers fire at once, after moving it by their duration (and telling
// OnWait, when set): code that waits (the backfill's pauses, the media engine's gaps) runs under
// test without waiting, and every wait shows in the time. The Fake itself, handed to the rest
// of the process, keeps timers that wait to be moved past.
type Stepping struct {
	*Fake
	OnWait func(d time.Duration)
}

// NewTimer moves the Fake by d (when d > 0) and returns a timer that has fired.
func (s Stepping) NewTimer(d time.Duration) (<-chan time.Time, func()) {
	if s.OnWait != nil {
		s.OnWait(d)
	}
	now := s.Fake.Now()
	if d > 0 {
		now = s.Fake.Advance(d)
	}
	c := make(chan time.Time, 1)
	c <- now
	return c, func() {}
}
