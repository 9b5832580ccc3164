package models

import "context"

// RetryReport is what a retry did: the jobs it made due now, and those it left waiting for a
// budget or held.
type RetryReport struct {
	Retried       int64
	SkippedBudget int64
	SkippedHeld   int64
}

// RetryJobsReport makes the filtered jobs due now, in one transaction with the counts of what it
// skipped: leased jobs, held tasks' jobs, and jobs whose budget still cannot cover them. Attempts,
// why and last error stay.
func (s *Store) RetryJobsReport(ctx context.Context, f JobFilter) (RetryReport, error) {
	var r RetryReport
	err := s.WithTx(ctx, func(tx *Store) error {
		now := tx.nowMs()
		where, args := f.where(now)
		free := ` AND (lease_until IS NULL OR lease_until <= ?)`
		day, limit := BudgetDay(tx.Now()), tx.dailyLimit
		count := func(dst *int64, cond string, extra ...any) error {
			a := append(append(append([]any{}, args...), now), extra...)
			return tx.scan(ctx, tx.db, dst, `SELECT COUNT(*) FROM content_jobs WHERE `+where+free+cond, a...)
		}
		if err := count(&r.SkippedHeld, ` AND `+heldTask); err != nil {
			return err
		}
		if err := count(&r.SkippedBudget, ` AND NOT `+heldTask+` AND why = 'budget' AND NOT (`+budgetRoom+`)`, day, limit); err != nil {
			return err
		}
		a := append(append(append([]any{now}, args...), now), day, limit)
		n, err := tx.exec(ctx, `UPDATE content_jobs SET due_at = ? WHERE `+where+free+` AND NOT `+heldTask+
			` AND (why IS NULL OR why <> 'budget' OR `+budgetRoom+`)`+notInReview, a...)
		if err != nil {
			return err
		}
		r.Retried = n
		if n > 0 {
			if f.UserID != 0 {
				tx.changed(f.UserID)
			} else {
				tx.changedAll()
			}
		}
		return nil
	})
	return wrapped(r, err, "retry jobs")
}
