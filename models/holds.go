package models

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// taskHolds is the held rule's one home: each content task an admin can hold, with the
// column of its flag in the holds row and its field of Holds, in the order of its bit (1, 2,
// 4 …). Holds.Task reads it in Go, and the SQL that must decide the same (heldTasks,
// heldTask, holdBits) is written from it, so the claims, the counts and the view's
// version hold exactly what Holds.Task holds. A new task that can be held is one row here.
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

// holdBits is SQL for the held tasks of the holds row (its columns prefixed by prefix, "" or
// "h.") as a bit set, each task's flag times its bit: screen + 2 * score.
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

// heldTasks is a condition a claim adds: the job's task is not held (heldTask). The held
// tasks are read by an uncorrelated subquery, once per statement (SQLite keeps it as an
// ephemeral table, PostgreSQL as a hashed subplan), so each candidate row costs one lookup.
// Written so, PostgreSQL's planner counts it as passing most rows, as it does: the bit test
// on the holds row it replaced was guessed to pass 0.5% of them, so a claim of 256 planned a
// scan and sort of the whole table instead of reading the due index's first rows (50–100 ms
// instead of under one at 30,000 due jobs, for a connection's first five claims at least).
var heldTasks = ` AND NOT (` + heldTask + `)`

// heldTask is true in SQL when the job's task is held: its task is in the list of held tasks
// the holds row makes, which a planner can match against an index on task.
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
