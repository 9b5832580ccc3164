package models

import (
	"context"
	"errors"
	"fmt"
)

// Holds says which work an admin holds: held work is claimed by no claimer on any replica
// (the claims read the holds row in the same statement), so it is neither charged nor asked.
// A held job's row is not changed: its why shows WhyHeld while the hold lasts, and lifting the
// hold makes it due again at its own due time.
type Holds struct {
	Screen     bool
	Score      bool
	Deliveries bool
}

// Any reports whether anything is held.
func (h Holds) Any() bool { return h.Screen || h.Score || h.Deliveries }

// Task reports whether a content task (TaskScreen, TaskScore) is held.
func (h Holds) Task(task Task) bool {
	switch task {
	case TaskScreen:
		return h.Screen
	case TaskScore:
		return h.Score
	}
	return false
}

// heldTasks is a condition a claim adds: the job's task is not held. The holds row is read by
// an uncorrelated scalar subquery (once per statement: SQLite caches it, PostgreSQL makes it
// an InitPlan) as a bit set, screen 1 and score 2, so each candidate row costs a bit test.
const heldTasks = ` AND (CASE task WHEN 'screen' THEN 1 ELSE 2 END & (SELECT screen + 2 * score FROM holds WHERE id = 1)) = 0`

// deliveriesHeld is true in SQL while webhook deliveries are held.
const deliveriesHeld = `EXISTS (SELECT 1 FROM holds WHERE deliveries = 1)`

// Holds reads what is held, from the writer, so that a hold just set is seen at once.
func (s *Store) Holds(ctx context.Context) (Holds, error) {
	// Read by hand (row): every admin job list reads it first, and GORM's reflective scan cost
	// more than the read.
	rows, err := s.query(ctx, s.db, `SELECT screen, score, deliveries FROM holds WHERE id = 1`)
	if err != nil {
		return Holds{}, fmt.Errorf("read holds: %w", err)
	}
	r := newRow(3)
	var h Holds
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			rows.Close()
			return Holds{}, fmt.Errorf("read holds: %w", err)
		}
		h = Holds{Screen: r.int64(0) == 1, Score: r.int64(1) == 1, Deliveries: r.int64(2) == 1}
	}
	if err := errors.Join(rows.Err(), rows.Close(), r.err); err != nil {
		return Holds{}, fmt.Errorf("read holds: %w", err)
	}
	return h, nil
}

// SetHolds replaces what is held; by is the admin's user id.
func (s *Store) SetHolds(ctx context.Context, h Holds, by int64) error {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	_, err := s.exec(ctx, `UPDATE holds SET screen = ?, score = ?, deliveries = ?, updated_at = ?, updated_by = ? WHERE id = 1`,
		b(h.Screen), b(h.Score), b(h.Deliveries), s.nowMs(), by)
	if err != nil {
		return fmt.Errorf("set holds: %w", err)
	}
	s.changedAll() // every author's view shows held jobs as held, or no longer
	return nil
}
