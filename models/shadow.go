package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ModelSettings is the model_settings row: the candidate this database's processes were
// started with, and the promoted live model and rubric (docs/shadow.md).
type ModelSettings struct {
	// Candidate is the candidate's name ("model rubric"); nil when none is set.
	Candidate *string `gorm:"column:candidate"`
	// ShadowScreens is 1 when the candidate is a model of its own, whose verdicts are shadowed.
	ShadowScreens int `gorm:"column:shadow_screens"`
	// LiveModel and LiveRubric are the promoted candidate's, nil while the configured live
	// model is live; LiveSince is when the last promotion or rollback took effect.
	LiveModel  *string    `gorm:"column:live_model"`
	LiveRubric *string    `gorm:"column:live_rubric"`
	LiveSince  *time.Time `gorm:"column:live_since;serializer:unixms"`
	ShadowDay  int64      `gorm:"column:shadow_day"`
	Calls      int64      `gorm:"column:shadow_calls"`
}

// Promoted reports whether the candidate is live.
func (m ModelSettings) Promoted() bool { return m.LiveModel != nil }

// CallsOn is the candidate's calls counted on the UTC day of now.
func (m ModelSettings) CallsOn(now time.Time) int64 {
	if m.ShadowDay != utcDay(now) {
		return 0
	}
	return m.Calls
}

// utcDay numbers now's UTC day from the epoch.
func utcDay(now time.Time) int64 { return now.UTC().Unix() / 86400 }

const modelSettingsColumns = `candidate, shadow_screens, live_model, live_rubric, live_since, shadow_day, shadow_calls`

// ReadModelSettings reads the model_settings row.
func (s *Store) ReadModelSettings(ctx context.Context) (ModelSettings, error) {
	var rows []ModelSettings
	if err := s.scan(ctx, s.db, &rows, `SELECT `+modelSettingsColumns+` FROM model_settings WHERE id = 1`); err != nil {
		return ModelSettings{}, fmt.Errorf("read the model settings: %w", err)
	}
	if len(rows) == 0 {
		return ModelSettings{}, nil
	}
	return rows[0], nil
}

// SetCandidate records the candidate a process starts with (nil: none), which the triggers
// read to owe shadow calls; screens says its verdicts are shadowed too.
func (s *Store) SetCandidate(ctx context.Context, candidate *string, screens bool) error {
	if _, err := s.exec(ctx, `UPDATE model_settings SET candidate = ?, shadow_screens = ? WHERE id = 1`,
		candidate, boolInt(screens)); err != nil {
		return fmt.Errorf("set the candidate: %w", err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetLive makes model and rubric the live ones from now on (a promotion), or the configured
// ones again when model is nil (a rollback). ok is false, and nothing changes, when the row
// already says so: a promotion needs the configured model live, a rollback a promoted one.
func (s *Store) SetLive(ctx context.Context, model, rubric *string) (ok bool, err error) {
	cond := `live_model IS NULL`
	if model == nil {
		cond = `live_model IS NOT NULL`
	}
	n, err := s.exec(ctx, `UPDATE model_settings SET live_model = ?, live_rubric = ?, live_since = ? WHERE id = 1 AND `+cond,
		model, rubric, s.nowMs())
	if err != nil {
		return false, fmt.Errorf("set the live model: %w", err)
	}
	return n == 1, nil
}

// ChargeShadow counts calls of the candidate's on now's UTC day if the day's count stays within
// limit; ok is false, and nothing is counted, when it would not.
func (s *Store) ChargeShadow(ctx context.Context, calls, limit int64, now time.Time) (bool, error) {
	day := utcDay(now)
	n, err := s.exec(ctx, `UPDATE model_settings SET shadow_calls = (CASE WHEN shadow_day = ? THEN shadow_calls ELSE 0 END) + ?,
		shadow_day = ? WHERE id = 1 AND (CASE WHEN shadow_day = ? THEN shadow_calls ELSE 0 END) + ? <= ?`,
		day, calls, day, day, calls, limit)
	if err != nil {
		return false, fmt.Errorf("charge the candidate's calls: %w", err)
	}
	return n == 1, nil
}

// shadowJobColumns are a shadow job's columns as a Job's (no author: the work is nobody's).
const shadowJobColumns = `id, task, kind, item_id, 0 AS user_id, due_at, attempts, why, NULL AS status, lease_until, lease_owner, created_at`

// ClaimShadow leases up to limit due shadow jobs to owner until now + lease, oldest due first,
// but only while no live job is due: a due, free content job whose task is not held stops
// every shadow claim, so shadow work is never claimed ahead of live work. Held tasks hold
// their shadow work too.
func (s *Store) ClaimShadow(ctx context.Context, limit int, lease time.Duration, owner string) ([]Job, error) {
	now := s.nowMs()
	rows, err := s.query(ctx, s.db, `UPDATE shadow_jobs SET lease_until = ?, lease_owner = ? WHERE id IN (
		SELECT id FROM shadow_jobs WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)`+heldTasks+`
		AND NOT EXISTS (SELECT 1 FROM content_jobs WHERE due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)`+heldTasks+`)
		ORDER BY due_at, id LIMIT ?`+s.dialect.skipLocked()+`) RETURNING `+shadowJobColumns,
		now+lease.Milliseconds(), owner, now, now, now, now, limit)
	if err != nil {
		return nil, fmt.Errorf("claim shadow jobs: %w", err)
	}
	return scanJobs(rows, limit)
}

// RescheduleShadow puts a claimed shadow job off until at with why and the error in words,
// counting an attempt when attempt is true, and frees its lease, if the claim still holds.
func (s *Store) RescheduleShadow(ctx context.Context, job Job, at time.Time, why Why, text *string, attempt bool) error {
	if _, err := s.exec(ctx, `UPDATE shadow_jobs SET due_at = ?, attempts = attempts + ?, why = ?, last_error = ?,
		lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ? AND lease_until = ?`,
		at.UnixMilli(), boolInt(attempt), why, text, job.ID, job.LeaseOwner, job.LeaseUntil); err != nil {
		return fmt.Errorf("reschedule shadow job %d: %w", job.ID, err)
	}
	return nil
}

// ReleaseShadowJob frees a claimed shadow job's lease without an attempt, if the claim still
// holds.
func (s *Store) ReleaseShadowJob(ctx context.Context, job Job) error {
	if _, err := s.exec(ctx, `UPDATE shadow_jobs SET lease_until = NULL, lease_owner = NULL
		WHERE id = ? AND lease_owner = ? AND lease_until = ?`, job.ID, job.LeaseOwner, job.LeaseUntil); err != nil {
		return fmt.Errorf("release shadow job %d: %w", job.ID, err)
	}
	return nil
}

// ReleaseShadowLeases frees every shadow job leased by owner (a process stopping).
func (s *Store) ReleaseShadowLeases(ctx context.Context, owner string) (int64, error) {
	n, err := s.exec(ctx, `UPDATE shadow_jobs SET lease_until = NULL, lease_owner = NULL WHERE lease_owner = ?`, owner)
	if err != nil {
		return 0, fmt.Errorf("release the shadow leases of %s: %w", owner, err)
	}
	return n, nil
}

// DropShadowJob deletes a shadow job whose item, or live answer, is gone.
func (s *Store) DropShadowJob(ctx context.Context, job Job) error {
	if _, err := s.exec(ctx, `DELETE FROM shadow_jobs WHERE id = ?`, job.ID); err != nil {
		return fmt.Errorf("drop shadow job %d: %w", job.ID, err)
	}
	return nil
}

// RecordShadowScreen keeps the candidate's verdict on a shadow job's item beside the live
// verdict it shadows, and settles the job, in one transaction. recorded is false when the
// live verdict is gone (the job is dropped) or the candidate's was already kept.
func (s *Store) RecordShadowScreen(ctx context.Context, job Job, model string, verdict Verdict, confidence float64) (recorded bool, err error) {
	err = s.WithTx(ctx, func(tx *Store) error {
		n, err := tx.exec(ctx, `INSERT INTO shadow_screens (kind, item_id, model, verdict, confidence, live_verdict, live_confidence, screened_at)
			SELECT kind, item_id, ?, ?, ?, verdict, confidence, ? FROM screens WHERE kind = ? AND item_id = ?
			ON CONFLICT (kind, item_id, model) DO NOTHING`, model, verdict, confidence, tx.nowMs(), job.Kind, job.ItemID)
		if err != nil {
			return err
		}
		recorded = n == 1
		return tx.DropShadowJob(ctx, job)
	})
	if err != nil {
		return false, fmt.Errorf("record the shadow screen of %s %d: %w", job.Kind, job.ItemID, err)
	}
	return recorded, nil
}

// RecordShadowScore keeps the candidate's score of a shadow job's revision (its mean art and
// runs, under rubric) beside the live score it shadows, and settles the job, in one
// transaction; recorded as RecordShadowScreen.
func (s *Store) RecordShadowScore(ctx context.Context, job Job, model, rubric string, art float64, runs []float64) (recorded bool, err error) {
	runsJSON, err := json.Marshal(runs)
	if err != nil {
		return false, fmt.Errorf("record the shadow score of revision %d: %w", job.ItemID, err)
	}
	err = s.WithTx(ctx, func(tx *Store) error {
		n, err := tx.exec(ctx, `INSERT INTO shadow_scores (revision_id, song_id, model, rubric, art, art_runs, live_art, live_rubric, scored_at)
			SELECT revision_id, song_id, ?, ?, ?, ?, art, rubric, ? FROM scores WHERE revision_id = ?
			ON CONFLICT (revision_id, model, rubric) DO NOTHING`, model, rubric, art, string(runsJSON), tx.nowMs(), job.ItemID)
		if err != nil {
			return err
		}
		recorded = n == 1
		return tx.DropShadowJob(ctx, job)
	})
	if err != nil {
		return false, fmt.Errorf("record the shadow score of revision %d: %w", job.ItemID, err)
	}
	return recorded, nil
}

// ShadowOwed counts the owed shadow jobs.
func (s *Store) ShadowOwed(ctx context.Context) (int64, error) {
	var n int64
	if err := s.scan(ctx, s.read, &n, `SELECT COUNT(*) FROM shadow_jobs`); err != nil {
		return 0, fmt.Errorf("count shadow jobs: %w", err)
	}
	return n, nil
}
