package models

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kept counts: owed jobs per (task, why) in job_counts and per author in mine_versions, kept
// by the triggers on content_jobs, so nothing counts the job table.

// jobCountsFold is how many job_counts rows a read sums before folding them into one per
// (task, why); only PostgreSQL appends rows, so writers never wait on a shared counter.
const jobCountsFold = 256

// JobsByTaskWhy counts owed jobs by task and why ("none" for none), from the kept counts.
func (s *Store) JobsByTaskWhy(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := s.query(ctx, s.read, `SELECT task, why, CAST(SUM(n) AS BIGINT), COUNT(*) FROM job_counts GROUP BY task, why`)
	if err != nil {
		return nil, fmt.Errorf("jobs by task and why: %w", err)
	}
	out := map[[2]string]int64{}
	r := newRow(4)
	var kept int64
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			rows.Close()
			return nil, fmt.Errorf("jobs by task and why: %w", err)
		}
		if n := r.int64(2); n != 0 {
			out[[2]string{r.str(0), r.str(1)}] = n
		}
		kept += r.int64(3)
	}
	if err := errors.Join(rows.Err(), rows.Close(), r.err); err != nil {
		return nil, fmt.Errorf("jobs by task and why: %w", err)
	}
	if kept > jobCountsFold {
		if err := s.foldJobCounts(ctx); err != nil {
			return nil, fmt.Errorf("jobs by task and why: %w", err)
		}
	}
	return out, nil
}

// foldJobCounts replaces job_counts' rows by one per (task, why), in one statement (PostgreSQL).
func (s *Store) foldJobCounts(ctx context.Context) error {
	_, err := s.exec(ctx, `WITH d AS (DELETE FROM job_counts RETURNING task, why, n)
		INSERT INTO job_counts (task, why, n) SELECT task, why, SUM(n) FROM d GROUP BY task, why HAVING SUM(n) <> 0`)
	return wrap(err, "fold job counts")
}

// narrow reports whether the filter names what no kept count follows.
func (f JobFilter) narrow() bool {
	return f.ID != 0 || f.Kind != "" || f.Author != "" || f.ItemID != 0 || f.State != "" || f.Outcome != ""
}

// keptCount answers CountJobs from the kept counts when it can (by task, why and author alone).
func (s *Store) keptCount(ctx context.Context, f JobFilter) (n int64, ok bool, err error) {
	switch {
	case f.narrow():
		return 0, false, nil
	case f.Deferred != nil && f.Why != "" && f.Why != WhyHeld:
		// The open breaker's put-off jobs are told apart by due time, which no count follows.
		return 0, false, nil
	case f.UserID != 0 && (f.Task != "" || f.Why != ""):
		return 0, false, nil
	case f.UserID != 0:
		n, _, err = maybe[int64](ctx, s, s.read, `SELECT jobs FROM mine_versions WHERE user_id = ?`, f.UserID)
		return n, err == nil, err
	}
	n, err = s.keptCountByTaskWhy(ctx, f)
	return n, err == nil, err
}

// keptCountByTaskWhy counts the owed jobs of f's task and why (either may be "") from the kept counts.
func (s *Store) keptCountByTaskWhy(ctx context.Context, f JobFilter) (int64, error) {
	pairs, err := s.JobsByTaskWhy(ctx)
	if err != nil {
		return 0, err
	}
	held := f.Held
	if held == nil && f.Why != "" {
		h, err := s.Holds(ctx)
		if err != nil {
			return 0, err
		}
		held = &h
	}
	var n int64
	for k, c := range pairs {
		task, why := Task(k[0]), Why(k[1])
		if f.Task != "" && task != f.Task {
			continue
		}
		switch f.Why {
		case "":
		case WhyHeld:
			if !held.Task(task) {
				continue
			}
		default:
			if held.Task(task) || why != f.Why {
				continue
			}
		}
		n += c
	}
	return n, nil
}

// OldestDue is the due time of the longest-waiting job due and free at now (nil: none).
func (s *Store) OldestDue(ctx context.Context, now time.Time) (*time.Time, error) {
	at, ok, err := maybe[int64](ctx, s, s.read, `SELECT due_at FROM content_jobs
		WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?) ORDER BY due_at, id LIMIT 1`, now, now)
	if err != nil || !ok {
		return nil, wrap(err, "oldest due job")
	}
	t := fromMillis(at)
	return &t, nil
}
