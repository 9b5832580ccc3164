package models

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A settled job is no content_jobs row: the admin's list shows it from its settling event (job_id).

// doneCond selects the events that settled a job.
const doneCond = `job_id IS NOT NULL AND outcome IN ('allow', 'block', 'scored', 'decided')`

// doneColumns are an event's id and eventColumns, and what a JobRow adds.
var doneColumns = `id, ` + eventColumns + `, ` + namesOf("events")

// doneWhere is the filter's condition on the events that settled jobs since since (ms).
func (f JobFilter) doneWhere(since int64) (string, []any) {
	conds := []string{doneCond, "at >= ?"}
	args := []any{since}
	add := func(cond string, a ...any) { conds = append(conds, cond); args = append(args, a...) }
	if f.ID != 0 {
		add("job_id = ?", f.ID)
	}
	f.eventWhere(add)
	return strings.Join(conds, " AND "), args
}

// eventWhere adds the filter's conditions on events: task, why ("none": no why), item and outcome.
func (f JobFilter) eventWhere(add func(cond string, args ...any)) {
	if f.Task != "" {
		add("event = ?", f.Task)
	}
	if f.Why == "none" {
		add("why IS NULL")
	} else if f.Why != "" {
		add("why = ?", f.Why)
	}
	f.whose(add)
	if f.Outcome != "" {
		add("outcome = ?", f.Outcome)
	}
}

// ListDoneJobs pages through the jobs the filter selects (its state aside) that settled since
// since, in order, after the cursor (nil: from the start); each row is the job as it settled,
// with Final the attempt that settled it.
func (s *Store) ListDoneJobs(ctx context.Context, f JobFilter, since time.Time, order string, after *JobCursor, limit int) ([]JobRow, error) {
	where, args := f.doneWhere(since.UnixMilli())
	jobs, err := s.jobPage(ctx, doneColumns+` FROM events`, where, args, pageOrder{order, after, [3]string{"job_id", "at", "attempt"}}, limit, scanDoneRows)
	return wrapped(jobs, err, "list settled jobs")
}

// CountDoneJobs counts the jobs the filter selects (its state aside) that settled since since.
func (s *Store) CountDoneJobs(ctx context.Context, f JobFilter, since time.Time) (int64, error) {
	where, args := f.doneWhere(since.UnixMilli())
	n, err := fetch[int64](ctx, s, s.read, `SELECT COUNT(*) FROM events WHERE `+where, args...)
	return n, wrap(err, "count settled jobs")
}

// DoneJobByID finds a job that settled since since; ErrNotFound otherwise.
func (s *Store) DoneJobByID(ctx context.Context, id int64, since time.Time) (JobRow, error) {
	jobs, err := s.ListDoneJobs(ctx, JobFilter{ID: id}, since, JobsByID, nil, 1)
	if err != nil {
		return JobRow{}, fmt.Errorf("settled job %d: %w", id, err)
	}
	if len(jobs) == 0 {
		return JobRow{}, missing("job", id)
	}
	return jobs[0], nil
}

// scanDoneRows reads rows of doneColumns as settled jobs, and closes rows.
func scanDoneRows(rows *queryRows, sizeHint int) ([]JobRow, error) {
	n := 1 + len(eventFields)
	return scanRows(rows, n+3, sizeHint, func(r *row) JobRow {
		e := r.event()
		j := JobRow{Job: Job{Task: e.Event, Kind: e.Kind, ItemID: e.ItemID, UserID: e.UserID, DueAt: e.At,
			Attempts: e.Attempt, Why: e.Why, Status: e.Status, LastError: e.Error},
			ItemTitle: r.strp(n + 1), SongID: r.int64p(n + 2), Final: &e}
		if e.JobID != nil {
			j.ID = *e.JobID
		}
		if name := r.strp(n); name != nil {
			j.UserName = *name
		}
		return j
	})
}
