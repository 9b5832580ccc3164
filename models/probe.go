package models

import (
	"context"
	"fmt"
	"time"
)

// TakeManualProbe records that an admin probes the model now, unless one did less than gap ago
// on any replica; then ok is false and wait is how long until the next is allowed.
func (s *Store) TakeManualProbe(ctx context.Context, gap time.Duration) (ok bool, wait time.Duration, err error) {
	now := s.nowMs()
	n, err := s.exec(ctx, `UPDATE model_breaker SET manual_probe_at = ?
		WHERE id = 1 AND (manual_probe_at IS NULL OR manual_probe_at <= ? OR manual_probe_at > ?)`, now, now-gap.Milliseconds(), now)
	if err != nil {
		return false, 0, fmt.Errorf("take the manual model probe: %w", err)
	}
	if n == 1 {
		return true, 0, nil
	}
	last, err := fetch[*int64](ctx, s, s.db, `SELECT manual_probe_at FROM model_breaker WHERE id = 1`)
	if err != nil {
		return false, 0, fmt.Errorf("take the manual model probe: %w", err)
	}
	wait = gap
	if last != nil {
		wait = time.Duration(*last+gap.Milliseconds()-now) * time.Millisecond
	}
	return false, max(wait, time.Millisecond), nil
}

// ManualProbeAnswered closes an open (or probing) breaker because an admin's test call was
// answered, as a job's successful probe does; closed says whether it acted.
func (s *Store) ManualProbeAnswered(ctx context.Context) (Breaker, bool, error) {
	var b Breaker
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		cur, err := tx.readBreaker(ctx, tx.db)
		if err != nil || cur.State == BreakerClosed {
			b = cur
			return err
		}
		until := time.UnixMilli(tx.nowMs())
		if d := cur.DeferredUntil(); d != nil && d.After(until) {
			until = *d
		}
		b, ok, err = tx.closeBreaker(ctx, until, `state <> 'closed'`)
		return err
	})
	return wrapped2(b, ok, err, "close the model breaker after a manual probe")
}

// ManualProbeFailed keeps a failed admin's test call's error on the breaker row, its state unchanged.
func (s *Store) ManualProbeFailed(ctx context.Context, lastError *string) error {
	if lastError == nil {
		return nil
	}
	_, err := s.exec(ctx, `UPDATE model_breaker SET last_error = ? WHERE id = 1`, lastError)
	return wrap(err, "record a failed manual model probe")
}

// DeferredByWhy counts by their own why ("none" for none) the jobs the open breaker puts off
// until until: due by then or untried, not leased, not held (with held, the held ones instead).
func (s *Store) DeferredByWhy(ctx context.Context, until time.Time, held bool) (map[Why]int64, error) {
	now := s.nowMs()
	var groups []struct {
		Why *string `gorm:"column:why"`
		N   int64   `gorm:"column:n"`
	}
	breaker, args := shownSQL(WhyBreaker, heldTask, &until, now)
	if held {
		breaker, args = shownSQL(WhyBreaker, `1 = 0`, &until, now)
		breaker += ` AND ` + heldTask
	}
	if err := s.scan(ctx, s.read, &groups, `SELECT why, COUNT(*) AS n FROM content_jobs WHERE `+breaker+` GROUP BY why`, args...); err != nil {
		return nil, fmt.Errorf("jobs put off by the breaker: %w", err)
	}
	out := map[Why]int64{}
	for _, g := range groups {
		w := Why("none")
		if g.Why != nil {
			w = Why(*g.Why)
		}
		out[w] += g.N
	}
	return out, nil
}
