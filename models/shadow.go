package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// ModelSettings is the model_settings row: the candidate and the promoted live model (docs/shadow.md).
type ModelSettings struct {
	// Candidate is the candidate's name ("model rubric"); nil when none is set.
	Candidate      *string    `gorm:"column:candidate"`
	CandidateSince *time.Time `gorm:"column:candidate_since;serializer:unixms"`
	// ShadowScreens is 1 when the candidate is a model of its own, whose verdicts are shadowed.
	ShadowScreens int `gorm:"column:shadow_screens"`
	// LiveModel and LiveRubric are the promoted candidate's (nil: the configured ones are live).
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

const modelSettingsColumns = `candidate, candidate_since, shadow_screens, live_model, live_rubric, live_since, shadow_day, shadow_calls`

// ReadModelSettings reads the model_settings row.
func (s *Store) ReadModelSettings(ctx context.Context) (ModelSettings, error) {
	m, err := fetch[ModelSettings](ctx, s, s.read, `SELECT `+modelSettingsColumns+` FROM model_settings WHERE id = 1`)
	return m, wrap(err, "read the model settings")
}

// SetCandidate records the candidate a process starts with (nil: none); screens shadows verdicts too.
func (s *Store) SetCandidate(ctx context.Context, candidate *string, screens bool) error {
	// candidate = NULL is never true: a new candidate, or none, starts its time anew.
	_, err := s.exec(ctx, `UPDATE model_settings SET candidate_since = CASE WHEN candidate = ? THEN candidate_since ELSE ? END,
		candidate = ?, shadow_screens = ? WHERE id = 1`, candidate, s.nowMs(), candidate, boolInt(screens))
	return wrap(err, "set the candidate")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetLive makes model and rubric live from now on (a promotion), or the configured ones again
// when model is nil (a rollback); ok is false, and nothing changes, when the row already says so.
func (s *Store) SetLive(ctx context.Context, model, rubric *string) (ok bool, err error) {
	cond := `live_model IS NULL`
	if model == nil {
		cond = `live_model IS NOT NULL`
	}
	n, err := s.exec(ctx, `UPDATE model_settings SET live_model = ?, live_rubric = ?, live_since = ? WHERE id = 1 AND `+cond,
		model, rubric, s.nowMs())
	return wrapped(n == 1, err, "set the live model")
}

// ChargeShadow counts calls of the candidate's on now's UTC day if the count stays within limit.
func (s *Store) ChargeShadow(ctx context.Context, calls, limit int64, now time.Time) (bool, error) {
	day := utcDay(now)
	n, err := s.exec(ctx, `UPDATE model_settings SET shadow_calls = (CASE WHEN shadow_day = ? THEN shadow_calls ELSE 0 END) + ?,
		shadow_day = ? WHERE id = 1 AND (CASE WHEN shadow_day = ? THEN shadow_calls ELSE 0 END) + ? <= ?`,
		day, calls, day, day, calls, limit)
	return wrapped(n == 1, err, "charge the candidate's calls")
}

// shadowJobColumns are a shadow job's columns as a Job's (no author: the work is nobody's).
const shadowJobColumns = `id, task, kind, item_id, 0 AS user_id, due_at, attempts, why, NULL AS status, lease_until, lease_owner, created_at`

// ClaimShadow leases up to limit due shadow jobs to owner until now + lease, oldest due first,
// only while no unheld live job is due, so shadow work never goes ahead of live work.
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

// RescheduleShadow puts a claimed shadow job off until at and frees its lease, if the claim holds.
func (s *Store) RescheduleShadow(ctx context.Context, job Job, at time.Time, why Why, text *string, attempt bool) error {
	_, err := s.exec(ctx, `UPDATE shadow_jobs SET due_at = ?, attempts = attempts + ?, why = ?, last_error = ?,
		lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ? AND lease_until = ?`,
		at.UnixMilli(), boolInt(attempt), why, text, job.ID, job.LeaseOwner, job.LeaseUntil)
	return wrap(err, "reschedule shadow job %d", job.ID)
}

// DropShadowJob deletes a shadow job whose item, or live answer, is gone.
func (s *Store) DropShadowJob(ctx context.Context, job Job) error {
	_, err := s.exec(ctx, `DELETE FROM shadow_jobs WHERE id = ?`, job.ID)
	return wrap(err, "drop shadow job %d", job.ID)
}

// RecordShadowScreen keeps the candidate's verdict beside the live one it shadows and settles
// the job, in one transaction; recorded is false when the live verdict is gone or it was kept.
func (s *Store) RecordShadowScreen(ctx context.Context, job Job, model string, verdict Verdict, confidence float64) (bool, error) {
	recorded, err := s.keepShadow(ctx, job, `INSERT INTO shadow_screens (kind, item_id, model, verdict, confidence, live_verdict,
		live_confidence, screened_at) SELECT kind, item_id, ?, ?, ?, verdict, confidence, ? FROM screens WHERE kind = ? AND item_id = ?
		ON CONFLICT (kind, item_id, model) DO NOTHING`, model, verdict, confidence, s.nowMs(), job.Kind, job.ItemID)
	return wrapped(recorded, err, "record the shadow screen of %s %d", job.Kind, job.ItemID)
}

// keepShadow runs insert, which keeps the candidate's answer beside the live one, and settles the
// job, in one transaction; kept is false when the live answer is gone or the candidate's is kept.
func (s *Store) keepShadow(ctx context.Context, job Job, insert string, args ...any) (kept bool, err error) {
	err = s.WithTx(ctx, func(tx *Store) error {
		n, err := tx.exec(ctx, insert, args...)
		if err != nil {
			return err
		}
		kept = n == 1
		return tx.DropShadowJob(ctx, job)
	})
	return kept, err
}

// RecordShadowScore is RecordShadowScreen for the candidate's score of a revision.
func (s *Store) RecordShadowScore(ctx context.Context, job Job, model, rubric string, art float64, runs []float64) (bool, error) {
	runsJSON, err := json.Marshal(runs)
	if err != nil {
		return false, fmt.Errorf("record the shadow score of revision %d: %w", job.ItemID, err)
	}
	recorded, err := s.keepShadow(ctx, job, `INSERT INTO shadow_scores (revision_id, song_id, model, rubric, art, art_runs, live_art,
		live_rubric, scored_at) SELECT revision_id, song_id, ?, ?, ?, ?, art, rubric, ? FROM scores WHERE revision_id = ?
		ON CONFLICT (revision_id, model, rubric) DO NOTHING`, model, rubric, art, string(runsJSON), s.nowMs(), job.ItemID)
	return wrapped(recorded, err, "record the shadow score of revision %d", job.ItemID)
}

// DropShadowJobs deletes every owed shadow job (the candidate is live: nothing to shadow).
func (s *Store) DropShadowJobs(ctx context.Context) error {
	_, err := s.exec(ctx, `DELETE FROM shadow_jobs`)
	return wrap(err, "drop the shadow jobs")
}

// ShadowOwed counts the owed shadow jobs.
func (s *Store) ShadowOwed(ctx context.Context) (int64, error) {
	n, err := fetch[int64](ctx, s, s.read, `SELECT COUNT(*) FROM shadow_jobs`)
	return n, wrap(err, "count shadow jobs")
}

// ShadowCell is N items of kind the live model gave Live and the candidate Candidate.
type ShadowCell struct {
	Kind      Kind      `gorm:"column:kind"`
	Live      Verdict   `gorm:"column:live_verdict"`
	Candidate Verdict   `gorm:"column:verdict"`
	N         int64     `gorm:"column:n"`
	From      time.Time `gorm:"column:first_at;serializer:unixms"`
	To        time.Time `gorm:"column:last_at;serializer:unixms"`
}

// ShadowScreenTable is the confusion table of model's verdicts against the live ones.
func (s *Store) ShadowScreenTable(ctx context.Context, model string) ([]ShadowCell, error) {
	cells, err := fetch[[]ShadowCell](ctx, s, s.read, `SELECT kind, live_verdict, verdict, COUNT(*) AS n, MIN(screened_at) AS first_at,
		MAX(screened_at) AS last_at FROM shadow_screens WHERE model = ? GROUP BY kind, live_verdict, verdict
		ORDER BY kind, live_verdict, verdict`, model)
	return cells, wrap(err, "the shadow confusion table")
}

// ShadowFlip is an item whose verdict the candidate would flip.
type ShadowFlip struct {
	Kind                Kind      `gorm:"column:kind"`
	ItemID              int64     `gorm:"column:item_id"`
	Live                Verdict   `gorm:"column:live_verdict"`
	Candidate           Verdict   `gorm:"column:verdict"`
	LiveConfidence      float64   `gorm:"column:live_confidence"`
	CandidateConfidence float64   `gorm:"column:confidence"`
	At                  time.Time `gorm:"column:screened_at;serializer:unixms"`
}

// ShadowFlips lists, newest first, at most limit items whose verdict model would flip.
func (s *Store) ShadowFlips(ctx context.Context, model string, limit int) ([]ShadowFlip, error) {
	flips, err := fetch[[]ShadowFlip](ctx, s, s.read, `SELECT kind, item_id, live_verdict, verdict, live_confidence, confidence, screened_at
		FROM shadow_screens WHERE model = ? AND verdict <> live_verdict ORDER BY screened_at DESC, kind, item_id LIMIT ?`,
		model, limit)
	return flips, wrap(err, "the shadow flips")
}

// ShadowBins is how many bins the confidence histograms have: tenths, the last holding 1 too.
const ShadowBins = 10

// binOf is SQL for col's confidence bin, by comparisons both dialects round alike.
func binOf(col string) string {
	q := "CASE"
	for i := 1; i < ShadowBins; i++ {
		q += fmt.Sprintf(" WHEN %s < %g THEN %d", col, float64(i)/ShadowBins, i-1)
	}
	return q + fmt.Sprintf(" ELSE %d END", ShadowBins-1)
}

// ShadowConfidence is the histograms of the live and of model's confidence over the items compared.
func (s *Store) ShadowConfidence(ctx context.Context, model string) (live, candidate [ShadowBins]int64, err error) {
	var rows []struct {
		Which string `gorm:"column:which"`
		Bin   int    `gorm:"column:bin"`
		N     int64  `gorm:"column:n"`
	}
	if err := s.scan(ctx, s.read, &rows, `SELECT 'live' AS which, b AS bin, COUNT(*) AS n FROM (SELECT `+binOf("live_confidence")+` AS b
		FROM shadow_screens WHERE model = ?) l GROUP BY b
		UNION ALL SELECT 'candidate', b, COUNT(*) FROM (SELECT `+binOf("confidence")+` AS b
		FROM shadow_screens WHERE model = ?) c GROUP BY b`, model, model); err != nil {
		return live, candidate, fmt.Errorf("the shadow confidence histograms: %w", err)
	}
	for _, r := range rows {
		if r.Bin < 0 || r.Bin >= ShadowBins {
			continue
		}
		if r.Which == "live" {
			live[r.Bin] = r.N
		} else {
			candidate[r.Bin] = r.N
		}
	}
	return live, candidate, nil
}

// ShadowScoreSums sums the differences of model's art under rubric from the live art.
type ShadowScoreSums struct {
	N    int64      `gorm:"column:n"`
	Sum  float64    `gorm:"column:sum_d"`
	Sum2 float64    `gorm:"column:sum_d2"`
	From *time.Time `gorm:"column:first_at;serializer:unixms"`
	To   *time.Time `gorm:"column:last_at;serializer:unixms"`
}

// ShadowScoreSums reads the sums of the score differences of model under rubric.
func (s *Store) ShadowScoreSums(ctx context.Context, model, rubric string) (ShadowScoreSums, error) {
	out, err := fetch[ShadowScoreSums](ctx, s, s.read, `SELECT COUNT(*) AS n, COALESCE(SUM(art - live_art), 0) AS sum_d,
		COALESCE(SUM((art - live_art) * (art - live_art)), 0) AS sum_d2, MIN(scored_at) AS first_at, MAX(scored_at) AS last_at
		FROM shadow_scores WHERE model = ? AND rubric = ?`, model, rubric)
	return out, wrap(err, "the shadow score differences")
}

// ShadowPoint is one revision's live art beside the candidate's.
type ShadowPoint struct {
	SongID    int64   `gorm:"column:song_id"`
	Title     string  `gorm:"column:title"`
	Live      float64 `gorm:"column:live_art"`
	Candidate float64 `gorm:"column:art"`
}

// ShadowPoints lists, newest first, at most limit scores of model under rubric beside the live art.
func (s *Store) ShadowPoints(ctx context.Context, model, rubric string, limit int) ([]ShadowPoint, error) {
	points, err := fetch[[]ShadowPoint](ctx, s, s.read, `SELECT song_id, '' AS title, live_art, art FROM shadow_scores
		WHERE model = ? AND rubric = ? ORDER BY scored_at DESC, revision_id DESC LIMIT ?`, model, rubric, limit)
	return points, wrap(err, "the shadow score points")
}

// ShadowRanked lists at most limit public songs by art that the candidate scored too.
func (s *Store) ShadowRanked(ctx context.Context, model, rubric string, limit int) ([]ShadowPoint, error) {
	points, err := fetch[[]ShadowPoint](ctx, s, s.read, `SELECT s.id AS song_id, COALESCE(s.public_title, s.title) AS title,
		s.art AS live_art, ss.art AS art
		FROM songs s JOIN shadow_scores ss ON ss.song_id = s.id AND ss.model = ? AND ss.rubric = ?
		WHERE s.public = 1 AND s.art IS NOT NULL
		AND ss.revision_id = (`+songScoredRevision+`)
		ORDER BY s.art DESC, s.id DESC LIMIT ?`, model, rubric, limit)
	return points, wrap(err, "the shadow ranking")
}

// songScoredRevision is SQL for the newest scored revision of song s.id (revisions_song).
const songScoredRevision = `SELECT r.id FROM revisions r JOIN scores sc ON sc.revision_id = r.id WHERE r.song_id = s.id
	ORDER BY r.id DESC LIMIT 1`

// Rescore is how far the re-score under the live rubric is: scored songs (Total), those under
// rubric (Done), and of those, the ones scored since the live model last changed (Since).
type Rescore struct {
	Total int64 `gorm:"column:total"`
	Done  int64 `gorm:"column:done"`
	Since int64 `gorm:"column:since"`
}

// RescoreProgress reads the re-score's progress under rubric since the live model changed.
func (s *Store) RescoreProgress(ctx context.Context, rubric string, since time.Time) (Rescore, error) {
	out, err := fetch[Rescore](ctx, s, s.read, `SELECT COUNT(*) AS total,
		COALESCE(SUM(CASE WHEN sc.rubric = ? THEN 1 ELSE 0 END), 0) AS done,
		COALESCE(SUM(CASE WHEN sc.rubric = ? AND sc.scored_at >= ? THEN 1 ELSE 0 END), 0) AS since
		FROM songs s JOIN scores sc ON sc.revision_id = (`+songScoredRevision+`)`, rubric, rubric, since.UnixMilli())
	return out, wrap(err, "the re-score's progress")
}

// OweRescores owes a score job now for every song scored under another rubric; it says how many.
func (s *Store) OweRescores(ctx context.Context, rubric string) (int64, error) {
	n, err := s.exec(ctx, `INSERT INTO content_jobs (task, kind, item_id, user_id, due_at)
		SELECT 'score', 'revision', sc.revision_id, r.user_id, ? FROM songs s
		JOIN scores sc ON sc.revision_id = (`+songScoredRevision+`) JOIN revisions r ON r.id = sc.revision_id
		WHERE sc.rubric <> ? ORDER BY r.user_id, r.id
		ON CONFLICT (task, kind, item_id) DO NOTHING`, s.nowMs(), rubric)
	return wrapped(n, err, "owe the re-scores under %s", rubric)
}

// RankedCursor is where a page of songs by art continues: in the live rubric's, or (Rest) the others.
type RankedCursor struct {
	SongCursor
	Rest bool `json:"r,omitempty"`
}

// PublicSongsRanked lists public songs by art while two rubrics' scores exist: first those
// under rubric, best first, then the rest (other rubrics best first, unscored last), newest
// first among equals, so no order mixes two rubrics' scores.
func (s *Store) PublicSongsRanked(ctx context.Context, rubric string, after *RankedCursor, limit int) ([]Song, error) {
	const cols = `SELECT ` + publicSongColumns + ` FROM songs WHERE public = 1`
	var songs []Song
	if after == nil || !after.Rest {
		q, args := cols+` AND score_rubric = ?`, []any{rubric}
		if after != nil && after.Art != nil {
			q += ` AND (art < ? OR (art = ? AND id < ?))`
			args = append(args, *after.Art, *after.Art, after.ID)
		}
		if err := s.scan(ctx, s.read, &songs, q+` ORDER BY art DESC, id DESC LIMIT `+strconv.Itoa(limit), args...); err != nil {
			return nil, fmt.Errorf("public songs under %s: %w", rubric, err)
		}
		if len(songs) == limit {
			return songs, nil
		}
		after = nil // the rest from its start
	}
	q, args := cols+` AND (score_rubric IS NULL OR score_rubric <> ?)`, []any{rubric}
	switch {
	case after != nil && after.Art != nil:
		q += ` AND (art < ? OR (art = ? AND id < ?) OR art IS NULL)`
		args = append(args, *after.Art, *after.Art, after.ID)
	case after != nil:
		q += ` AND art IS NULL AND id < ?`
		args = append(args, after.ID)
	}
	rest, err := fetch[[]Song](ctx, s, s.read, q+` ORDER BY `+s.dialect.artDesc()+` LIMIT `+strconv.Itoa(limit-len(songs)), args...)
	if err != nil {
		return nil, fmt.Errorf("public songs under other rubrics: %w", err)
	}
	return append(songs, rest...), nil
}
