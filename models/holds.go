package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Holds says which work an admin holds: no claimer claims it, and it shows WhyHeld.
type Holds struct {
	Screen     bool
	Score      bool
	Deliveries bool
}

// taskHolds is the held rule's one home: each task an admin can hold, its flag's column and its
// field of Holds, in bit order; Holds.Task and the SQL are written from it.
var taskHolds = []struct {
	task   Task
	column string
	field  func(*Holds) *bool
}{
	{TaskScreen, "screen", func(h *Holds) *bool { return &h.Screen }},
	{TaskScore, "score", func(h *Holds) *bool { return &h.Score }},
}

// Task reports whether a content task (TaskScreen, TaskScore) is held; an unknown task never is.
func (h Holds) Task(task Task) bool {
	for _, th := range taskHolds {
		if th.task == task {
			return *th.field(&h)
		}
	}
	return false
}

// holdBits is SQL for the held tasks as a bit set (columns prefixed by prefix): screen + 2 * score.
func holdBits(prefix string) string {
	terms := make([]string, len(taskHolds))
	for i, th := range taskHolds {
		terms[i] = prefix + th.column
		if i > 0 {
			terms[i] = strconv.Itoa(1<<i) + " * " + terms[i]
		}
	}
	return strings.Join(terms, " + ")
}

// holdsOfBits are the task holds a holdBits value says.
func holdsOfBits(bits int64) Holds {
	var h Holds
	for i, th := range taskHolds {
		*th.field(&h) = bits&(1<<i) != 0
	}
	return h
}

// heldTasks is a condition a claim adds: the job's task is not held (one uncorrelated subquery,
// which PostgreSQL's planner estimates well).
var heldTasks = ` AND NOT (` + heldTask + `)`

// heldTask is true in SQL when the job's task is in the holds row's list of held tasks.
var heldTask = func() string {
	selects := make([]string, len(taskHolds))
	for i, th := range taskHolds {
		selects[i] = "SELECT '" + string(th.task) + "' FROM holds WHERE " + th.column + " = 1"
	}
	return "task IN (" + strings.Join(selects, " UNION ALL ") + ")"
}()

// deliveriesHeld is true in SQL while webhook deliveries are held.
const deliveriesHeld = `EXISTS (SELECT 1 FROM holds WHERE deliveries = 1)`

// Holds reads what is held, from the writer, so that a hold just set is seen at once.
func (s *Store) Holds(ctx context.Context) (Holds, error) {
	// Read by hand: every admin job list reads it first.
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
	_, err := s.exec(ctx, `UPDATE holds SET screen = ?, score = ?, deliveries = ?, updated_at = ?, updated_by = ? WHERE id = 1`,
		boolInt(h.Screen), boolInt(h.Score), boolInt(h.Deliveries), s.nowMs(), by)
	if err != nil {
		return fmt.Errorf("set holds: %w", err)
	}
	s.changedAll() // every author's view shows held jobs as held, or no longer
	return nil
}
