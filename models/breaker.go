package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The model breaker's states.
const (
	BreakerClosed  = "closed"  // the model is asked
	BreakerOpen    = "open"    // the model is not asked; due jobs wait for the next probe
	BreakerProbing = "probing" // one job's call tests the model
)

// Breaker is the model breaker's row: one per database, shared by every replica.
type Breaker struct {
	State       string     `gorm:"column:state"`
	Since       *time.Time `gorm:"column:since;serializer:unixms"`
	Failures    int        `gorm:"column:failures"`
	Probes      int        `gorm:"column:probes"`
	Why         *Why       `gorm:"column:why"`
	Status      *int       `gorm:"column:status"`
	NextProbeAt *time.Time `gorm:"column:next_probe_at;serializer:unixms"`
	ProbeOwner  *string    `gorm:"column:probe_owner"`
	ProbeUntil  *time.Time `gorm:"column:probe_until;serializer:unixms"`
	// LastError is the last real failure in words, kept after closing for the operator.
	LastError *string `gorm:"column:last_error"`
}

const breakerColumns = `state, since, failures, probes, why, status, next_probe_at, probe_owner, probe_until, last_error`

// ModelBreakerData is the data of a model.breaker event.
type ModelBreakerData struct {
	State       string     `json:"state"`
	Since       time.Time  `json:"since"`
	Failures    int        `json:"failures"`
	Why         *Why       `json:"why"`
	Status      *int       `json:"status"`
	NextProbeAt *time.Time `json:"nextProbeAt"`
}

// DeferredUntil is when the jobs the breaker puts off are asked again: while open its next
// probe, while probing the probe's end; nil while closed.
func (b Breaker) DeferredUntil() *time.Time {
	switch b.State {
	case BreakerOpen:
		return b.NextProbeAt
	case BreakerProbing:
		return b.ProbeUntil
	}
	return nil
}

// ReadBreaker reads the breaker's row.
func (s *Store) ReadBreaker(ctx context.Context) (Breaker, error) { return s.readBreaker(ctx, s.read) }

// readBreaker reads the breaker's row on pool (s.db: in a transaction, its own).
func (s *Store) readBreaker(ctx context.Context, pool *gorm.DB) (Breaker, error) {
	b := Breaker{State: BreakerClosed} // no row: closed
	if err := s.scan(ctx, pool, &b, `SELECT `+breakerColumns+` FROM model_breaker WHERE id = 1`); err != nil {
		return Breaker{}, fmt.Errorf("read the model breaker: %w", err)
	}
	return b, nil
}

// updateBreaker runs a conditional UPDATE of the row returning it; ok is false when it did not hold.
func (s *Store) updateBreaker(ctx context.Context, q string, args ...any) (Breaker, bool, error) {
	return maybe[Breaker](ctx, s, s.db, q+` RETURNING `+breakerColumns, args...)
}

// OpenBreaker opens a closed breaker after failures consecutive failures, the last of them why,
// with its first probe at nextProbe, owing model.breaker; ok is false when it was not closed.
func (s *Store) OpenBreaker(ctx context.Context, failures int, why Why, status *int, lastError *string, nextProbe time.Time) (Breaker, bool, error) {
	var b Breaker
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		now := tx.nowMs()
		b, ok, err = tx.updateBreaker(ctx, `UPDATE model_breaker SET state = 'open', since = ?, failures = ?, probes = 0,
			why = ?, status = ?, last_error = ?, next_probe_at = ?, probe_owner = NULL, probe_until = NULL WHERE id = 1 AND state = 'closed'`,
			now, failures, why, status, lastError, nextProbe.UnixMilli())
		if err != nil || !ok {
			return err
		}
		return tx.EnqueueWebhook(ctx, EventModelBreaker, breakerData(b))
	})
	return wrapped2(b, ok, err, "open the model breaker")
}

func breakerData(b Breaker) ModelBreakerData {
	d := ModelBreakerData{State: b.State, Failures: b.Failures, Why: b.Why, Status: b.Status}
	if b.Since != nil {
		d.Since = *b.Since
	}
	if b.State != BreakerClosed {
		d.NextProbeAt = b.NextProbeAt
	}
	return d
}

// ClaimProbe makes owner, until until, the one prober of an open breaker whose probe is due (or
// whose prober's claim ran out); ok is false when none is due or another holds it.
func (s *Store) ClaimProbe(ctx context.Context, owner string, until time.Time) (Breaker, bool, error) {
	now := s.nowMs()
	b, ok, err := s.updateBreaker(ctx, `UPDATE model_breaker SET state = 'probing', probe_owner = ?, probe_until = ?
		WHERE id = 1 AND ((state = 'open' AND next_probe_at <= ?) OR (state = 'probing' AND probe_until <= ?))`,
		owner, until.UnixMilli(), now, now)
	return b, ok, wrap(err, "claim the model probe")
}

// ProbeFailed opens the breaker again after owner's probe failed, with the next probe at next,
// and moves the jobs put off until parkedUntil to it, in one transaction.
func (s *Store) ProbeFailed(ctx context.Context, owner string, next, parkedUntil time.Time, lastError *string) (Breaker, bool, error) {
	var b Breaker
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		b, ok, err = tx.updateBreaker(ctx, `UPDATE model_breaker SET state = 'open', failures = failures + 1, probes = probes + 1,
			next_probe_at = ?, probe_owner = NULL, probe_until = NULL, last_error = COALESCE(?, last_error)
			WHERE id = 1 AND state = 'probing' AND probe_owner = ?`,
			next.UnixMilli(), lastError, owner)
		if err != nil || !ok {
			return err
		}
		return tx.moveParked(ctx, next, parkedUntil)
	})
	return wrapped2(b, ok, err, "record a failed model probe")
}

// moveParked makes the jobs put off until parkedUntil (untried, or model failures) due at instead.
func (s *Store) moveParked(ctx context.Context, at, parkedUntil time.Time) error {
	now := s.nowMs()
	n, err := s.exec(ctx, `UPDATE content_jobs SET due_at = ? WHERE due_at > ? AND due_at <= ?
		AND (why IS NULL OR why IN ('unreachable', 'upstream')) AND (lease_until IS NULL OR lease_until <= ?)`,
		at.UnixMilli(), now, parkedUntil.UnixMilli(), now)
	if n > 0 {
		s.changedAll() // every author whose jobs moved sees a new next attempt
	}
	return wrap(err, "move parked jobs")
}

// releaseUntried makes every job put off untried (no why, due later) due now, as the breaker closes.
func (s *Store) releaseUntried(ctx context.Context) error {
	now := s.nowMs()
	n, err := s.exec(ctx, `UPDATE content_jobs SET due_at = ? WHERE why IS NULL AND due_at > ? AND (lease_until IS NULL OR lease_until <= ?)`,
		now, now, now)
	if n > 0 {
		s.changedAll()
	}
	return wrap(err, "release untried jobs")
}

// ReleaseProbe gives owner's probe up without a call: open again, its probe still due.
func (s *Store) ReleaseProbe(ctx context.Context, owner string) error {
	_, err := s.exec(ctx, `UPDATE model_breaker SET state = 'open', probe_owner = NULL, probe_until = NULL
		WHERE id = 1 AND state = 'probing' AND probe_owner = ?`, owner)
	return wrap(err, "release the model probe")
}

// CloseBreaker closes the breaker after owner's probe succeeded (ok false: no longer owner's).
func (s *Store) CloseBreaker(ctx context.Context, owner string, parkedUntil time.Time) (Breaker, bool, error) {
	var b Breaker
	var ok bool
	err := s.WithTx(ctx, func(tx *Store) (err error) {
		b, ok, err = tx.closeBreaker(ctx, parkedUntil, `state = 'probing' AND probe_owner = ?`, owner)
		return err
	})
	return wrapped2(b, ok, err, "close the model breaker")
}

// closeBreaker closes the breaker if cond (taking args) holds, makes the jobs it put off until
// parkedUntil due now, so the backlog drains at once, and owes the model.breaker event.
func (tx *Store) closeBreaker(ctx context.Context, parkedUntil time.Time, cond string, args ...any) (Breaker, bool, error) {
	now := tx.nowMs()
	b, ok, err := tx.updateBreaker(ctx, `UPDATE model_breaker SET state = 'closed', since = ?, failures = 0, probes = 0,
		why = NULL, status = NULL, next_probe_at = NULL, probe_owner = NULL, probe_until = NULL
		WHERE id = 1 AND `+cond, append([]any{now}, args...)...)
	if err != nil || !ok {
		return b, ok, err
	}
	if err := tx.moveParked(ctx, time.UnixMilli(now), parkedUntil); err != nil {
		return b, ok, err
	}
	if err := tx.releaseUntried(ctx); err != nil {
		return b, ok, err
	}
	return b, ok, tx.EnqueueWebhook(ctx, EventModelBreaker, breakerData(b))
}

// ParkJob puts a claimed job off until at while the breaker is open, with no attempt or charge,
// keeping its why, and frees the lease; it does nothing when the claim is gone.
func (s *Store) ParkJob(ctx context.Context, job Job, at time.Time) (bool, error) {
	n, err := s.parkExec(ctx, `UPDATE content_jobs SET due_at = CASE WHEN `+breakerNotClosed+` THEN ? ELSE due_at END,
		lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ?`, at.UnixMilli(), job.ID, job.LeaseOwner)
	if err != nil {
		return false, fmt.Errorf("put job %d off: %w", job.ID, err)
	}
	if n > 0 {
		s.changed(job.UserID)
	}
	return n > 0, nil
}

// parkExec runs q, which puts jobs off, with the breaker's row locked first (PostgreSQL), so a
// close either comes after (and releases the jobs) or is seen, and puts nothing off.
func (s *Store) parkExec(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *Store) error {
		if _, err := fetch[[]string](ctx, tx, tx.db, `SELECT state FROM model_breaker WHERE id = 1`+tx.dialect.forUpdate()); err != nil {
			return err
		}
		var err error
		n, err = tx.exec(ctx, q, args...)
		return err
	})
	return n, err
}

// breakerNotClosed is true in SQL while the breaker is open or probing.
const breakerNotClosed = `EXISTS (SELECT 1 FROM model_breaker WHERE id = 1 AND state <> 'closed')`

// ParkDue puts every due, free, unheld job (userID's, if set) off until at, as ParkJob does.
func (s *Store) ParkDue(ctx context.Context, at time.Time, userID int64) (int64, error) {
	now := s.nowMs()
	q := `UPDATE content_jobs SET due_at = ?, lease_until = NULL, lease_owner = NULL
		WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?) AND ` + breakerNotClosed + heldTasks
	args := []any{at.UnixMilli(), now, now}
	if userID != 0 {
		q += ` AND user_id = ?`
		args = append(args, userID)
	}
	n, err := s.parkExec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("put due jobs off: %w", err)
	}
	switch {
	case n == 0:
	case userID != 0:
		s.changed(userID)
	default:
		s.changedAll()
	}
	return n, nil
}
