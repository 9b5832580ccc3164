package models

import (
	"context"
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

// heldTasks is a condition a claim adds: the job's task is not held (heldTask). The held
// tasks are read by an uncorrelated subquery, once per statement (SQLite keeps it as an
// ephemeral table, PostgreSQL as a hashed subplan), so each candidate row costs one lookup.
// Written so, PostgreSQL's planner counts it as passing most rows, as it does: the bit test
// on the holds row it replaced was guessed to pass 0.5% of them, so a claim of 256 planned a
// scan and sort of the whole table instead of reading the due index's first rows (50–100 ms
// instead of under one at 30,000 due jobs, for a connection's first five claims at least).
const heldTasks = ` AND NOT (` + heldTask + `)`

// deliveriesHeld is true in SQL while webhook deliveries are held.
const deliveriesHeld = `EXISTS (SELECT 1 FROM holds WHERE deliveries = 1)`

// Holds reads what is held, from the writer, so that a hold just set is seen at once.
func (s *Store) Holds(ctx context.Context) (Holds, error) {
	var row struct {
		Screen     int `gorm:"column:screen"`
		Score      int `gorm:"column:score"`
		Deliveries int `gorm:"column:deliveries"`
	}
	if err := s.scan(ctx, s.db, &row, `SELECT screen, score, deliveries FROM holds WHERE id = 1`); err != nil {
		return Holds{}, fmt.Errorf("read holds: %w", err)
	}
	return Holds{Screen: row.Screen == 1, Score: row.Score == 1, Deliveries: row.Deliveries == 1}, nil
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
