// Package clock lets time-based behaviour (leases, backoff, budgets, ETAs) be tested without
// sleeping: production code reads a Clock, tests hand it a Fake they move by hand.
package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time and makes timers of that time: owed's one time source, injected
// everywhere something waits or decides what is due (the backfill's pauses, the media engine's
// gaps, long polls, the write limiter).
type Clock interface {
	Now() time.Time
	// NewTimer makes a timer that fires once d has passed on this clock (at once if d <= 0);
	// stop releases it. The channel gets at most one value.
	NewTimer(d time.Duration) (c <-chan time.Time, stop func())
}

// Real is the wall clock, in UTC.
type Real struct{}

// Now returns the current UTC time.
func (Real) Now() time.Time { return time.Now().UTC() }

// NewTimer is a wall-clock timer.
func (Real) NewTimer(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

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

// Sleep waits d on c, or until ctx ends, whichever is first; it returns ctx's error when ctx
// has ended.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 || ctx.Err() != nil {
		return ctx.Err()
	}
	t, stop := c.NewTimer(d)
	defer stop()
	select {
	case <-t:
	case <-ctx.Done():
	}
	return ctx.Err()
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

// Offset is a clock set off from another by a shift that may change while it runs: owed's
// reading of the database's time, the process's clock corrected by the skew last measured
// against the database (so replicas whose own clocks disagree still agree on leases and due
// times), and in tests a replica whose clock runs behind or ahead. Durations are the base
// clock's: timers wait on it unchanged.
type Offset struct {
	Base  Clock
	shift atomic.Int64 // nanoseconds
}

// NewOffset is base shifted by d.
func NewOffset(base Clock, d time.Duration) *Offset {
	o := &Offset{Base: base}
	o.shift.Store(int64(d))
	return o
}

// Now is the base clock's time plus the shift.
func (o *Offset) Now() time.Time { return o.Base.Now().Add(o.Shift()) }

// NewTimer is the base clock's timer.
func (o *Offset) NewTimer(d time.Duration) (<-chan time.Time, func()) { return o.Base.NewTimer(d) }

// Shift is how far this clock is set off from its base.
func (o *Offset) Shift() time.Duration { return time.Duration(o.shift.Load()) }

// SetShift sets it off by d from now on.
func (o *Offset) SetShift(d time.Duration) { o.shift.Store(int64(d)) }
