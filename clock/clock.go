// Package clock lets time-based behaviour (leases, backoff, budgets, ETAs) be tested without
// sleeping: production code reads a Clock, tests hand it a Fake from owedtest/clocktest.
package clock

import (
	"context"
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
