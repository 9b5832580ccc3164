package app

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/owed/owed/clock"
)

// The process reads time from the database's clock (through clock.Offset, measured at start
// and every clockCheckEvery), so that replicas compare leases, due times and budget days on one
// clock. Timers and periods stay the process's own.

// clockCheckEvery is how often the shift to the database's clock is measured again.
const clockCheckEvery = time.Minute

// DefaultMaxClockSkew is how far a replica's clock may be from the database's before it says so.
const DefaultMaxClockSkew = 5 * time.Second

// checkClock sets the process's clock by the database's, at the middle of the round trip. A
// skew past OWED_MAX_CLOCK_SKEW is logged and kept for /readyz; a failed reading keeps the last.
func (a *App) checkClock(ctx context.Context) {
	base := a.dbClock.Base
	before := base.Now()
	db, err := a.Store.DatabaseTime(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.Log.Warn("clock check", "err", err)
		}
		return
	}
	after := base.Now()
	skew := db.Sub(before.Add(after.Sub(before) / 2))
	a.dbClock.SetShift(skew)
	problem := ""
	if skew.Abs() > a.Config.MaxClockSkew {
		side := "behind"
		if skew < 0 {
			side = "ahead of"
		}
		problem = fmt.Sprintf("this replica's clock is %s %s the database's (more than OWED_MAX_CLOCK_SKEW %s); owed keeps time by the database's clock",
			skew.Abs().Round(time.Millisecond), side, a.Config.MaxClockSkew)
		a.Log.Warn("clock skew", "skewMs", skew.Milliseconds(), "maxMs", a.Config.MaxClockSkew.Milliseconds(),
			"problem", problem)
	}
	a.clockProblem.Store(&problem)
}

// ClockProblem says how far this replica's clock is from the database's when that is more than
// OWED_MAX_CLOCK_SKEW, or "".
func (a *App) ClockProblem() string {
	if p := a.clockProblem.Load(); p != nil {
		return *p
	}
	return ""
}

// databaseClock is the process's clock set by the database's (nil when the given clock is kept
// as it is: a test's own, unless it asks for the database's time).
func databaseClock(opts Options) *clock.Offset {
	if opts.Clock != nil && !opts.DatabaseClock {
		return nil
	}
	base := opts.Clock
	base = cmp.Or[clock.Clock](base, clock.Real{})
	return clock.NewOffset(base, 0)
}
